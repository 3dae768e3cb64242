package orch_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
)

// TestDecodeItems_Attacks: every list a producer could write to forge, overflow or confuse a
// fan-out is refused whole, with a reason a person can act on.
func TestDecodeItems_Attacks(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, i)
		}
		return b.String() + "]"
	}
	tests := []struct {
		name, src, want string
	}{
		{"10,001 items", many(10_001), "10001 items; at most 10000"},
		{"an object, not a list", `{"items": [1, 2]}`, "want a JSON list of items, got an object"},
		{"a string", `"a"`, "want a JSON list of items, got a string"},
		{"duplicate ids", `[{"id": "a"}, {"id": "b"}, {"id": "a"}]`, `items 0 and 2 have the same key "a" (an item's id, else its index): each item names one task`},
		{"an id equal to another item's index", `[{"x": 1}, {"id": "0"}]`, `items 0 and 1 have the same key "0"`},
		{"a key in an object twice", `[{"id": "a", "id": "b"}]`, "not one exact JSON document"},
		{"a key twice in another case", `[{"id": "a", "ID": "b"}]`, "not one exact JSON document"},
		{"a path in an id", `[{"id": "../x"}]`, `item 0: id "../x" cannot name a task`},
		{"an id forging a fix", `[{"id": "a].fix-1"}]`, `item 0: id "a].fix-1" cannot name a task`},
		{"an id forging a review", `[{"id": "a.review-r1"}]`, `item 0: id "a.review-r1" cannot name a task`},
		{"an upper-case id", `[{"id": "A"}]`, `item 0: id "A" cannot name a task`},
		{"an empty id", `[{"id": ""}]`, `item 0: id "" cannot name a task`},
		{"a numeric id", `[{"id": 7}]`, "item 0: its id is a number; want a string"},
		{"a fraction", `[1.5]`, "item 0: canonical json"},
		{"a huge integer", `[9007199254740993]`, "item 0: canonical json"},
		{"data after the list", `[1] [2]`, "not one exact JSON document"},
		{"invalid UTF-8", "[\"\xff\"]", "not one exact JSON document: not valid UTF-8"},
		{"a huge file", "[" + strings.Repeat(" ", orch.MaxItemsBytes) + "]", fmt.Sprintf("%d bytes; at most %d", orch.MaxItemsBytes+2, orch.MaxItemsBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := orch.DecodeItems([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeItems = %d items, %v; want an error with %q", len(items), err, tt.want)
			}
		})
	}
}

func TestDecodeItems(t *testing.T) {
	items, err := orch.DecodeItems([]byte(` [ {"id": "pkg-a", "path": "a/b", "n": 2, "z": null}, "text", {"no": "id"}, [1, {"b": 1, "a": 2}] ] `))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Key+"="+string(it.Value))
	}
	want := []string{`pkg-a={"id":"pkg-a","n":2,"path":"a/b","z":null}`, `1="text"`, `2={"no":"id"}`, `3=[1,{"a":2,"b":1}]`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("items\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if items, err := orch.DecodeItems([]byte(many10000())); err != nil || len(items) != 10_000 {
		t.Errorf("10,000 items: %d, %v", len(items), err)
	}
}

func many10000() string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range 10_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"k%d"}`, i)
	}
	return b.String() + "]"
}

// TestDecodeReview_Attacks: a reviewer's file says one thing or is refused.
func TestDecodeReview_Attacks(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"approve twice in two cases", `{"approve": true, "Approve": false}`, "read review"},
		{"approve twice", `{"approve": false, "approve": true}`, "read review"},
		{"only a case-folded approve", `{"Approve": true}`, "read review"},
		{"no approve", `{"reasons": ["fine"]}`, `"approve" is required`},
		{"a string approve", `{"approve": "yes"}`, "read review"},
		{"an unknown field", `{"approve": true, "score": 10}`, "unknown field"},
		{"not an object", `[true]`, "read review"},
		{"too many reasons", `{"approve": false, "reasons": [` + strings.Repeat(`"r",`, 32) + `"r"]}`, "33 reasons; at most 32"},
		{"a long reason", `{"approve": false, "reasons": ["` + strings.Repeat("x", 2049) + `"]}`, "reason 0 is 2049 bytes; at most 2048"},
		{"a huge file", `{"approve": true, "reasons": ["` + strings.Repeat("x", orch.MaxReviewBytes) + `"]}`, "over the 65536 byte limit"},
		{"data after it", `{"approve": true} {"approve": false}`, "read review"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := orch.DecodeReview([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeReview = %+v, %v; want an error with %q", r, err, tt.want)
			}
		})
	}
	r, err := orch.DecodeReview([]byte(`{"approve": true}`))
	if err != nil || !r.Approve || r.Reasons == nil || r.Invalid {
		t.Errorf("DecodeReview = %+v, %v", r, err)
	}
}

// TestDecodeFinalReview: a reviewer's final answer is its review when it is exactly one
// review object, with white space or one fence around it; anything else is refused, naming
// what is wrong and the form wanted.
func TestDecodeFinalReview(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		approve   bool
		reasons   int
	}{
		{"bare", `{"approve": true}`, true, 0},
		{"white space", "\n\n  {\"approve\": false, \"reasons\": [\"no test\"]}  \n", false, 1},
		{"json fence", "```json\n{\"approve\": false, \"reasons\": [\"a\", \"b\"]}\n```", false, 2},
		{"bare fence", "```\n{\"approve\": true}\n```\n", true, 0},
		{"a reason quoting a fence", "```json\n{\"approve\": false, \"reasons\": [\"drop the ``` in README\"]}\n```", false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := orch.DecodeFinalReview([]byte(tt.src))
			if err != nil || r.Approve != tt.approve || len(r.Reasons) != tt.reasons || r.Invalid {
				t.Errorf("DecodeFinalReview = %+v, %v", r, err)
			}
		})
	}
	for _, tt := range []struct{ name, src, want string }{
		{"prose before", "Looks good to me.\n{\"approve\": true}", `it starts "Looks good to me.`},
		{"prose only", "LGTM", `it starts "LGTM", not with the review object; want only {"approve": true|false`},
		{"prose after", "{\"approve\": true}\nShip it.", "read review"},
		{"two objects", `{"approve": false} {"approve": true}`, "read review"},
		{"two fences", "```json\n{\"approve\": false}\n```\n```json\n{\"approve\": true}\n```", "read review"},
		{"an open fence", "```json\n{\"approve\": true}", `not closed by a line "` + "```" + `"`},
		{"another language", "```js\n{\"approve\": true}\n```", `opens with a line "` + "```json" + `"`},
		{"empty", "  \n", "empty"},
		{"empty fence", "```json\n\n```", "empty"},
		{"approve in another case", `{"approve": true, "Approve": false}`, "read review"},
		{"over the limit", `{"approve": true, "reasons": ["` + strings.Repeat("x", orch.MaxReviewBytes) + `"]}`, "at most 65536"},
		{"not UTF-8", "{\"approve\": true, \"reasons\": [\"\xff\"]}", "UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := orch.DecodeFinalReview([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeFinalReview = %+v, %v; want an error with %q", r, err, tt.want)
			}
		})
	}
}
