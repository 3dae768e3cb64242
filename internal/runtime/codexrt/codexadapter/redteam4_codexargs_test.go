package codexadapter

import (
	"testing"

	"github.com/agora-dev/agora/internal/runtime/codexrt"
)

// TestRedTeam4_CodexGateReadsArgumentsAsCodexDoes: the
// gate's reading of exec_command's arguments against spellings where a reader could differ
// from Codex's serde: a key written with escapes that names cmd twice, a NUL, a key only a
// trimming reader would take for cmd, a key in another case, nesting past the gate's depth,
// an argument Codex's tool does not offer. Each is refused before codex sees it; the plain
// call passes with its cmd. A lone surrogate (serde refuses the arguments, so Codex runs
// nothing) is read by the gate as U+FFFD, a word no grant's "git status" matches: never as
// another command.
func TestRedTeam4_CodexGateReadsArgumentsAsCodexDoes(t *testing.T) {
	deep := `{"cmd":"git status","justification":` + repeat("[", 70) + repeat("]", 70) + `}`
	for _, tc := range []struct {
		name, args string
		refused    bool
	}{
		{"escaped duplicate cmd", `{"cmd":"echo PWNED > p","c\u006dd":"git status"}`, true},
		{"escaped duplicate, reversed", `{"c\u006dd":"echo PWNED > p","cmd":"git status"}`, true},
		{"trailing-space key", `{"cmd ":"echo PWNED > p","cmd":"git status"}`, true},
		{"folded key", `{"CMD":"echo PWNED > p"}`, true},
		{"alias key", `{"command":"echo PWNED > p"}`, true},
		{"deep nesting", deep, true},
		{"not an object", `"git status"`, true},
		{"NUL in cmd", `{"cmd":"git status\u0000; echo PWNED"}`, true},
		{"plain", `{"cmd":"git status"}`, false},
	} {
		event := `{"type":"response.output_item.done","item":{"type":"function_call","name":"exec_command","call_id":"c1","arguments":` + jsonString(tc.args) + `}}`
		calls, why := eventCalls([]byte(event))
		refused := why != ""
		for _, c := range calls {
			refused = refused || c.Refused != ""
			if c.Refused == "" && c.Exec != nil && !tc.refused && *c.Exec.Cmd != "git status" {
				t.Errorf("%s: cmd read as %q", tc.name, *c.Exec.Cmd)
			}
			// A NUL reaches the judgement as part of cmd, where the one parser refuses it.
			if c.Refused == "" && c.Exec != nil && tc.name == "NUL in cmd" {
				argv := execArgv(c.Exec, "/usr/bin/bash")
				refused = refused || !codexrt.ArgvAllowed([]string{"git status"}, argv)
			}
		}
		if refused != tc.refused {
			t.Errorf("%s: refused = %v (%q %+v), want %v", tc.name, refused, why, calls, tc.refused)
		}
	}
}

func TestRedTeam4_CodexGateLoneSurrogate(t *testing.T) {
	event := `{"type":"response.output_item.done","item":{"type":"function_call","name":"exec_command","call_id":"c1","arguments":` + jsonString(`{"cmd":"git status\ud800"}`) + `}}`
	calls, why := eventCalls([]byte(event))
	if why != "" || len(calls) != 1 || calls[0].Exec == nil {
		return // refused outright: fine
	}
	argv := execArgv(calls[0].Exec, "/usr/bin/bash")
	if codexrt.ArgvAllowed([]string{"git status"}, argv) || *calls[0].Exec.Cmd != "git status\ufffd" {
		t.Errorf("a lone surrogate read as %q, allowed by \"git status\"", *calls[0].Exec.Cmd)
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
