package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLearn_MarkedOverMCP ("the dispatch is marked learn everywhere it is shown"): a
// learn dispatch a person started on the CLI reads learn: true over MCP (the official SDK
// client over stdio) from agora_dispatch_describe and from agora_dispatch_cancel, which
// answers an ended dispatch with its record; a plain dispatch of the same subagent carries no
// learn key at all. An MCP client can see a learn dispatch, never start one
// (TestLearn_MCPCannotLearn).
func TestLearn_MarkedOverMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	ids := map[bool]string{}
	for _, learn := range []bool{false, true} {
		args := []string{"dispatch", "run", "--subagent", "writer", "-o", "json"}
		if learn {
			args = append(args, "--learn")
		}
		var rec struct {
			ID    string `json:"id"`
			State string `json:"state"`
			Learn bool   `json:"learn"`
		}
		out := agora(t, home, nil, args...)
		if err := json.Unmarshal(out, &rec); err != nil || rec.State != "finished" || rec.Learn != learn {
			t.Fatalf("dispatch run (learn %v): %v\n%s", learn, err, out)
		}
		ids[learn] = rec.ID
	}
	cs := stdioSession(t, home)
	for learn, id := range ids {
		for _, tool := range []string{"agora_dispatch_describe", "agora_dispatch_cancel"} {
			res := call(t, cs, tool, map[string]any{"id": id})
			var got dispatchOut
			decode(t, res, &got)
			if got.Dispatch.ID != id || got.Dispatch.Learn != learn {
				t.Errorf("%s %s (learn %v): id %s, learn %v", tool, id, learn, got.Dispatch.ID, got.Dispatch.Learn)
			}
			raw, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(string(raw), `"learn":`); has != learn {
				t.Errorf("%s %s (learn %v): a learn key = %v in %s", tool, id, learn, has, raw)
			}
		}
	}
}
