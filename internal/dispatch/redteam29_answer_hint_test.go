package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
)

// TestRedTeam29_RunAttemptRefusalQuotesTheTask: the refusal that
// sends an MCP client's person to the run (a run's attempt is answered through the run)
// names the command with a fan-out item's task id quoted, so pasting it answers that task and
// no file's namesake.
func TestRedTeam29_RunAttemptRefusalQuotesTheTask(t *testing.T) {
	err := dispatch.MCPReadOnly(&dispatch.Record{ID: "d-1", RunID: "r-1", TaskID: "fan[a]"})
	if err == nil || !strings.Contains(err.Error(), "agora orch answer r-1 'fan[a]' --answer TEXT") {
		t.Errorf("refusal %v, want the answer command with 'fan[a]' quoted", err)
	}
}
