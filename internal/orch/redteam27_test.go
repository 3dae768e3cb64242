package orch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
)

// TestRedTeam27_SandboxFilesDecodedExactly: what a reviewer or a fan-out producer leaves is
// the agent's, so the host reads it exactly. Keys spelled with escapes, Unicode case folds
// (ſ folds to s in encoding/json), keys twice and an item id equal to another item's index
// are refused; an id that only looks like "id" after folding ("ıd") is no id.
func TestRedTeam27_SandboxFilesDecodedExactly(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"approve":true,"reaſons":["x"]}`, "unknown field"},
		{`{"approve":false,"reasons":[],"reaſons":["x"]}`, "duplicate key"},
		{`{"approve":true,"appro\u0076e":false}`, "duplicate key"},
		{`{"approve":true,"reasons":["a"],"reasons":["b"]}`, "duplicate key"},
		{`{"approve":null}`, `"approve" is required`},
		{`{"approve":"true"}`, "read review"},
		{`{"approve":true} {"approve":false}`, "read review"},
	} {
		if v, err := orch.DecodeReview([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("review %s: %+v, %v; want an error with %q", c.doc, v, err, c.want)
		}
	}
	if v, err := orch.DecodeReview([]byte(`{"\u0061pprove":true}`)); err != nil || !v.Approve {
		t.Errorf(`an escaped spelling of "approve" alone is that key: %+v, %v`, v, err)
	}
	for _, c := range []struct{ doc, want string }{
		{`[{"id":"a"},{"\u0069d":"a"}]`, "same key"},
		{`[{"id":"a","i\u0064":"b"}]`, "duplicate key"},
		{`[{"id":"1"}, 1]`, "same key"},
		{`[{"id":"a.fix-1"}]`, "cannot name a task"},
		{`[{"id":"a].review-r1"}]`, "cannot name a task"},
		{`[{"id":"x/../y"}]`, "cannot name a task"},
		{`[{"id":"A"}]`, "cannot name a task"},
		{`[{"id":"é"}]`, "cannot name a task"},
		{`[{"id":"` + strings.Repeat("a", 64) + `"}]`, "cannot name a task"},
		{`[{"id":"a"}][]`, "not one exact JSON document"},
		{`{"items":[1]}`, "want a JSON list"},
	} {
		if v, err := orch.DecodeItems([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("items %s: %+v, %v; want an error with %q", c.doc, v, err, c.want)
		}
	}
	items, err := orch.DecodeItems([]byte(`[{"ıd":"zz"}, {"id":"01"}, 1]`))
	if err != nil || len(items) != 3 || items[0].Key != "0" || items[1].Key != "01" || items[2].Key != "2" {
		t.Errorf("items: %+v, %v; want keys 0, 01, 2", items, err)
	}
}
