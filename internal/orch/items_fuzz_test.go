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

// FuzzDecodeReview reads arbitrary bytes as a reviewer's verdict.json: it never panics, and a
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
