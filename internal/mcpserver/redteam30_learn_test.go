package mcpserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestRedTeam30_LearnNeverAnArgument: learn is a person's CLI decision, so
// agora_dispatch has no learn input in any spelling: a learn key in another case, escaped,
// given twice, as a string, inside resume, or as a mode, is refused as an unknown argument
// before anything is dispatched. (The dispatcher port also sets NoLearn on every MCP dispatch
// and answer; TestLearn_MCPCannotLearn covers that end to end.) A learn key inside input is
// the subagent's input, not an argument, and the schema says nothing of learn.
func TestRedTeam30_LearnNeverAnArgument(t *testing.T) {
	dispatch := findTool(t, "agora_dispatch")
	for _, raw := range []string{
		`{"subagent":"w","learn":true}`,
		`{"subagent":"w","learn":false}`,
		`{"subagent":"w","Learn":true}`,
		`{"subagent":"w","LEARN":true}`,
		`{"subagent":"w","le\u0061rn":true}`,
		`{"subagent":"w","\u006c\u0065\u0061\u0072\u006e":true}`,
		`{"subagent":"w","learn":"true"}`,
		`{"subagent":"w","learn":1}`,
		`{"subagent":"w","learn":true,"learn":true}`,
		`{"subagent":"w","mode":"learn"}`,
		`{"subagent":"w","learn_hosts":["evil.example"]}`,
		`{"subagent":"w","ｌｅａｒｎ":true}`,
		`{"subagent":"w","learn ":true}`,
		`{"resume":{"dispatch":"d","answer":"a","learn":true}}`,
		`{"resume":{"dispatch":"d","answer":"a","Learn":true}}`,
	} {
		_, err := dispatch.decode(json.RawMessage(raw))
		var ae *ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("agora_dispatch %s: err = %v, want an ArgumentError", raw, err)
		}
	}
	got, err := dispatch.decode(json.RawMessage(`{"subagent":"w","input":{"learn":true}}`))
	if err != nil {
		t.Fatalf("a learn key inside input: %v", err)
	}
	if a := got.(dispatchArgs); string(a.Input) != `{"learn":true}` {
		t.Errorf("input = %s", a.Input)
	}
	for _, tl := range tools() {
		if strings.Contains(strings.ToLower(string(tl.schema)), `"learn`) {
			t.Errorf("%s's schema offers learn: %s", tl.name, tl.schema)
		}
		if strings.Contains(tl.name, "suggest") || strings.Contains(tl.name, "learn") {
			t.Errorf("an MCP tool %s: suggest and learn are the CLI's only", tl.name)
		}
	}
}
