package reviewwire_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/reviewwire"
)

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
		{"a huge file", `{"approve": true, "reasons": ["` + strings.Repeat("x", reviewwire.MaxBytes) + `"]}`, "over the 65536 byte limit"},
		{"data after it", `{"approve": true} {"approve": false}`, "read review"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := reviewwire.Decode([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeReview = %+v, %v; want an error with %q", r, err, tt.want)
			}
		})
	}
	r, err := reviewwire.Decode([]byte(`{"approve": true}`))
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
			r, err := reviewwire.DecodeFinal([]byte(tt.src))
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
		{"over the limit", `{"approve": true, "reasons": ["` + strings.Repeat("x", reviewwire.MaxBytes) + `"]}`, "at most 65536"},
		{"not UTF-8", "{\"approve\": true, \"reasons\": [\"\xff\"]}", "UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := reviewwire.DecodeFinal([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeFinalReview = %+v, %v; want an error with %q", r, err, tt.want)
			}
		})
	}
}

// FuzzDecodeReview reads arbitrary bytes as a review object: it never panics, and a
// review it takes is within its limits and reads the same through encoding/json (one meaning).
func FuzzDecodeReview(f *testing.F) {
	for _, s := range []string{`{"approve": true}`, `{"approve": false, "reasons": ["a", "b"]}`, `{"approve": true, "Approve": false}`,
		`{"Approve": true}`, `{"approve": true, "reasons": null}`, `[]`, `{"approve": 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := reviewwire.Decode(b)
		if err != nil {
			return
		}
		if len(r.Reasons) > reviewwire.MaxReasons || r.Invalid {
			t.Fatalf("review %+v", r)
		}
		var plain struct {
			Approve bool     `json:"approve"`
			Reasons []string `json:"reasons"`
		}
		if err := json.Unmarshal(b, &plain); err != nil || plain.Approve != r.Approve {
			t.Fatalf("encoding/json reads %+v (%v), DecodeReview %+v", plain, err, r)
		}
	})
}

// FuzzDecodeFinalReview reads arbitrary bytes as a reviewer's final answer: it never panics; a
// review it takes is within its limits, came from an answer of at most MaxReviewBytes, and is
// exactly what DecodeReview reads from the one object in it (found here by encoding/json,
// after the white space and the one fence allowed around it).
func FuzzDecodeFinalReview(f *testing.F) {
	for _, s := range []string{`{"approve": true}`, " \n{\"approve\": false, \"reasons\": [\"a\"]}\n", "```json\n{\"approve\": true}\n```",
		"```\n{\"approve\": false}\n```\n", "Here it is: {\"approve\": true}", "{\"approve\": true}\n```", "```json\n{\"approve\": true}",
		"```json\n{\"approve\": true}\n```\n```json\n{\"approve\": false}\n```", `{"approve": true} {"approve": false}`, "```js\n{}\n```", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := reviewwire.DecodeFinal(b)
		if err != nil {
			return
		}
		if len(b) > reviewwire.MaxBytes || len(r.Reasons) > reviewwire.MaxReasons || r.Invalid || r.Reasons == nil {
			t.Fatalf("review %+v from %d bytes", r, len(b))
		}
		body := bytes.TrimSpace(b)
		if rest, ok := bytes.CutPrefix(body, []byte("```")); ok {
			_, inner, _ := bytes.Cut(rest, []byte("\n"))
			inner, _ = bytes.CutSuffix(bytes.TrimRight(inner, " \t\r\n"), []byte("\n```"))
			body = bytes.TrimSpace(inner)
		}
		again, err := reviewwire.Decode(body)
		if err != nil || again.Approve != r.Approve || len(again.Reasons) != len(r.Reasons) {
			t.Fatalf("the answer %q reads %+v, its object %q reads %+v (%v)", b, r, body, again, err)
		}
	})
}
