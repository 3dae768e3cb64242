package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/shellwords"
)

// TestRedTeam44D_RunAttemptRefusalNamesHowToCancel: the refusal an MCP client gets when it
// cancels (or answers) a run's attempt says "answer or cancel it through the run" and must
// name both commands, each pasting back as the words it means (a fan-out item's id quoted).
// Failed before: it named only `agora orch answer ... --answer TEXT`, so a person sent there
// to cancel was given the answer command.
func TestRedTeam44D_RunAttemptRefusalNamesHowToCancel(t *testing.T) {
	err := dispatch.MCPReadOnly(&dispatch.Record{ID: "d-1", RunID: "r-1", TaskID: "fan[a]"})
	if err == nil {
		t.Fatal("a run's attempt is not read-only over MCP")
	}
	msg := err.Error()
	const cancel = "agora orch cancel r-1 --task 'fan[a]'"
	if !strings.Contains(msg, "answer or cancel it through the run") || !strings.Contains(msg, cancel) {
		t.Fatalf("refusal %q, want it to name %q", msg, cancel)
	}
	words, err := shellwords.Split(cancel)
	if err != nil || strings.Join(words, "\x00") != strings.Join([]string{"agora", "orch", "cancel", "r-1", "--task", "fan[a]"}, "\x00") {
		t.Errorf("%q pastes as %q (%v)", cancel, words, err)
	}
}
