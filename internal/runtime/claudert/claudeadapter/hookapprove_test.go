package claudeadapter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/claudert"
)

// The attack: a Bash command line that runs `git push` without starting with the words of
// the rule ("true && git push origin main", "$(echo git) push x", "git -c x=y push"). A
// line that is one simple command is read as its argv; anything else is held by any command
// rule; an input the hook cannot read exactly (the line under "Command", twice) is an error.
func TestHeldBy_Claude(t *testing.T) {
	rules := []grant.ApproveRule{{Command: "git push *"}}
	tests := []struct {
		tool, input string
		want        bool
		err         bool
	}{
		{"Bash", `{"command":"git push origin"}`, true, false},
		{"Bash", `{"command":"git status"}`, false, false},
		{"Bash", `{"command":"git 'status'"}`, false, false},
		{"Bash", `{"command":"git -c x.y=z push r HEAD:x"}`, true, false},
		{"Bash", `{"command":"git -c alias.p=push p"}`, true, false},
		{"Bash", `{"command":"true && git push origin main"}`, true, false},
		{"Bash", `{"command":"$(echo git) push x"}`, true, false},
		{"Bash", `{"command":"git  push\norigin"}`, true, false},
		{"Bash", `{"command":""}`, true, false},
		{"Bash", `{}`, false, true},
		{"Bash", `{"Command":"git push"}`, false, true},
		{"Bash", `{"command":"git status","command":"git push"}`, false, true},
		{"Bash", `{"command":["git","push"]}`, false, true},
		{"Write", `{"file_path":"a","content":"x"}`, false, false},
		{"mcp__srv__push", `{}`, false, false},
	}
	for _, tt := range tests {
		_, got, err := heldBy(rules, tt.tool, json.RawMessage(tt.input))
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("heldBy(%s %s) = %v, %v; want %v, error %v", tt.tool, tt.input, got, err, tt.want, tt.err)
		}
	}
	if _, held, _ := heldBy([]grant.ApproveRule{{Tool: "write_file"}}, "Edit", json.RawMessage(`{}`)); !held {
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
