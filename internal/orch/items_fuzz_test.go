package orch_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictjson"
)

// FuzzDecodeItems reads arbitrary bytes as a fan-out list: it never panics; a list it takes
// has at most MaxFanOutItems items, each with a distinct valid key and a canonical value that
// is one exact JSON document.
func FuzzDecodeItems(f *testing.F) {
	for _, s := range []string{`[]`, `[1, "a", null, {"id": "x"}, [{"id": "y"}]]`, `[{"id": "a"}, {"id": "a"}]`, `[{"id": "a", "ID": "b"}]`,
		`[{"id": "../x"}]`, `[{"id": 1}]`, `{"a": 1}`, `[1.5e300]`, "[\"\xff\"]", `[{"id":"0"},{}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := orch.DecodeItems(b)
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

// FuzzDecodeReview reads arbitrary bytes as a review object: it never panics, and a
// review it takes is within its limits and reads the same through encoding/json (one meaning).
func FuzzDecodeReview(f *testing.F) {
	for _, s := range []string{`{"approve": true}`, `{"approve": false, "reasons": ["a", "b"]}`, `{"approve": true, "Approve": false}`,
		`{"Approve": true}`, `{"approve": true, "reasons": null}`, `[]`, `{"approve": 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := orch.DecodeReview(b)
		if err != nil {
			return
		}
		if len(r.Reasons) > orch.MaxReviewReasons || r.Invalid {
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
		r, err := orch.DecodeFinalReview(b)
		if err != nil {
			return
		}
		if len(b) > orch.MaxReviewBytes || len(r.Reasons) > orch.MaxReviewReasons || r.Invalid || r.Reasons == nil {
			t.Fatalf("review %+v from %d bytes", r, len(b))
		}
		body := bytes.TrimSpace(b)
		if rest, ok := bytes.CutPrefix(body, []byte("```")); ok {
			_, inner, _ := bytes.Cut(rest, []byte("\n"))
			inner, _ = bytes.CutSuffix(bytes.TrimRight(inner, " \t\r\n"), []byte("\n```"))
			body = bytes.TrimSpace(inner)
		}
		again, err := orch.DecodeReview(body)
		if err != nil || again.Approve != r.Approve || len(again.Reasons) != len(r.Reasons) {
			t.Fatalf("the answer %q reads %+v, its object %q reads %+v (%v)", b, r, body, again, err)
		}
	})
}
