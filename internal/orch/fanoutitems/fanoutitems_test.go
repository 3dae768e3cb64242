package fanoutitems_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/fanoutitems"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictjson"
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
		{"a huge file", "[" + strings.Repeat(" ", fanoutitems.MaxBytes) + "]", fmt.Sprintf("%d bytes; at most %d", fanoutitems.MaxBytes+2, fanoutitems.MaxBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := fanoutitems.Decode([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeItems = %d items, %v; want an error with %q", len(items), err, tt.want)
			}
		})
	}
}

func TestDecodeItems(t *testing.T) {
	items, err := fanoutitems.Decode([]byte(` [ {"id": "pkg-a", "path": "a/b", "n": 2, "z": null}, "text", {"no": "id"}, [1, {"b": 1, "a": 2}] ] `))
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
	if items, err := fanoutitems.Decode([]byte(many10000())); err != nil || len(items) != 10_000 {
		t.Errorf("10,000 items: %d, %v", len(items), err)
	}
}

// FuzzDecodeItems reads arbitrary bytes as a fan-out list: it never panics; a list it takes
// has at most MaxFanOutItems items, each with a distinct valid key and a canonical value that
// is one exact JSON document.
func FuzzDecodeItems(f *testing.F) {
	for _, s := range []string{`[]`, `[1, "a", null, {"id": "x"}, [{"id": "y"}]]`, `[{"id": "a"}, {"id": "a"}]`, `[{"id": "a", "ID": "b"}]`,
		`[{"id": "../x"}]`, `[{"id": 1}]`, `{"a": 1}`, `[1.5e300]`, "[\"\xff\"]", `[{"id":"0"},{}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := fanoutitems.Decode(b)
		if err != nil {
			return
		}
		if len(items) > plan.MaxFanOutItems {
			t.Fatalf("%d items", len(items))
		}
		seen := map[string]bool{}
		for _, it := range items {
			if !plan.ValidItemKey(it.Key) || seen[it.Key] {
				t.Fatalf("key %q invalid or repeated", it.Key)
			}
			seen[it.Key] = true
			if err := strictjson.Check(it.Value); err != nil {
				t.Fatalf("value %s: %v", it.Value, err)
			}
			var v any
			if err := json.Unmarshal(it.Value, &v); err != nil {
				t.Fatalf("value %s: %v", it.Value, err)
			}
			again, _ := json.Marshal(v)
			if !json.Valid(again) || bytes.ContainsRune(it.Value, '\n') {
				t.Fatalf("value %s is not compact canonical JSON", it.Value)
			}
		}
	})
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
