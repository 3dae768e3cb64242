package dispatch_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
)

// TestLearn_CodexRealCLI (#30, codex with the real CLI): under a grant of "git status" only,
// a learn dispatch's script is reported by agora's gate as tool.would_deny (exec_command, the
// argv) before codex sees it, then runs: the dispatch finishes with the script's file in its
// patch and the command allowed on record. Without --learn the same script is refused before
// it ran (TestCodexGate_BashScript_RealCLI). Failed before: the gate refused it.
func TestLearn_CodexRealCLI(t *testing.T) {
	h := newCodexGateHome(t)
	h.learn = true
	o := h.run("status-only", responsestest.Exec(`printf '%s\n' 'LEARNED' > NOTES.md`), responsestest.Say("done"))
	if o.rec.State != "finished" {
		t.Fatalf("learn dispatch %s: %s %s %q\nstderr:\n%s", o.id, o.rec.State, o.rec.Reason, o.rec.Detail, h.agora("dispatch", "logs", o.id, "--stderr"))
	}
	if !strings.Contains(o.patch, "+LEARNED") {
		t.Errorf("the script did not run in the learn dispatch %s:\n%s", o.id, o.patch)
	}
	if got := o.decisions(); len(got) != 1 || got[0] != "exec_command allowed" {
		t.Errorf("tool.call entries of %s: %q, want exec_command allowed", o.id, got)
	}
	var would []struct {
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(h.agora("audit", "log", "--kind", "tool.would_deny", "-o", "json")), &would); err != nil {
		t.Fatal(err)
	}
	if len(would) != 1 || would[0].Details["dispatch"] != o.id || would[0].Details["tool"] != "exec_command" ||
		!strings.Contains(would[0].Details["command"].(string), "LEARNED") {
		t.Errorf("tool.would_deny entries = %+v, want one exec_command with the script", would)
	} else if r := would[0].Details["reporter"]; r != "worker" {
		// #30 F7: agora's gate runs in the worker, which proves it with its key.
		t.Errorf("the gate's would_deny has reporter %v, want worker", r)
	}
}
