package worker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/claudert"
)

// The attack: a Bash command line that runs `git push` without starting with the words of
// the rule ("true && git push origin main", "$(echo git) push x"). Anything with shell
// syntax is held by any command rule.
func TestHeldBy_Claude(t *testing.T) {
	rules := []grant.ApproveRule{{Command: "git push *"}}
	tests := []struct {
		tool, input string
		want        bool
	}{
		{"Bash", `{"command":"git push origin"}`, true},
		{"Bash", `{"command":"git status"}`, false},
		{"Bash", `{"command":"true && git push origin main"}`, true},
		{"Bash", `{"command":"$(echo git) push x"}`, true},
		{"Bash", `{"command":"git  push\norigin"}`, true},
		{"Bash", `{}`, true},
		{"Write", `{"file_path":"a","content":"x"}`, false},
		{"mcp__srv__push", `{}`, false},
	}
	for _, tt := range tests {
		if _, got := heldBy(rules, tt.tool, json.RawMessage(tt.input)); got != tt.want {
			t.Errorf("heldBy(%s %s) = %v, want %v", tt.tool, tt.input, got, tt.want)
		}
	}
	if _, held := heldBy([]grant.ApproveRule{{Tool: "write_file"}}, "Edit", json.RawMessage(`{}`)); !held {
		t.Error("a write_file rule does not hold Edit")
	}
	// The hook flags carry the rules through claude's settings unchanged.
	back, err := parseApprove(func() []string {
		var v []string
		for _, a := range approveArgs(rules) {
			v = append(v, a[len("--approve="):])
		}
		return v
	}())
	if err != nil || len(back) != 1 || back[0] != rules[0] {
		t.Errorf("approve flags round trip: %+v, %v", back, err)
	}
}

// claude lets a call through when its PreToolUse hook times out, so a hook that may hold a
// call gets more than the approval timeout.
func TestHookTimeout(t *testing.T) {
	if got := hookTimeout(10*time.Minute, true); got != 660 {
		t.Errorf("hook timeout for a 10m approval timeout = %d, want 660", got)
	}
	if got := hookTimeout(time.Second, true); got != claudert.HookTimeout {
		t.Errorf("hook timeout for a 1s approval timeout = %d, want the default %d", got, claudert.HookTimeout)
	}
	if got := hookTimeout(time.Hour, false); got != 0 {
		t.Errorf("hook timeout without approvals = %d, want 0 (the default)", got)
	}
}
