package mcpserver

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzLearnInPlan: the MCP server's check of a submitted plan for learn never
// panics, and never lets through a plan one of whose tasks has a learn key as a
// case-sensitive JSON reader (encoding/json into a map, as the service's decoder keys are
// exact) sees it; a denial always names such a task.
func FuzzLearnInPlan(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":true}]}`,
		`{"tasks":[{"id":"a","le\u0061rn":false}]}`,
		`{"tasks":[{"id":"a","learn":true,"Learn":false}]}`,
		`{"tasks":[{"id":"a","input":{"learn":true}}]}`,
		`{"tasks":[{"id":"a"}],"Tasks":[{"id":"b","learn":true}]}`,
		`{"tasks":"x"}`, `[]`, `{}`, `{"tasks":[1,{"learn":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := learnInPlan(raw)
		var denied *DeniedError
		var doc struct {
			Tasks []map[string]json.RawMessage `json:"tasks"`
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(raw, &top) != nil || json.Unmarshal(top["tasks"], &doc.Tasks) != nil {
			return
		}
		has := false
		for _, task := range doc.Tasks {
			if _, ok := task["learn"]; ok {
				has = true
			}
		}
		if has && err == nil {
			t.Fatalf("a plan with a learn task passed: %q", raw)
		}
		if errors.As(err, &denied) && !has {
			t.Fatalf("denied a plan without a learn task: %q: %v", raw, err)
		}
	})
}
