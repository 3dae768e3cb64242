package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestPlanGrants_NarrowNeverWiden runs tasks whose plan narrows their subagent's grant (the
// worker's capability grants only the command pattern "sh -c *"): keeping the pattern runs,
// narrowing commands to none denies the command, and asking for a tool the capability does
// not grant is refused as denied, before any worker starts.
func TestPlanGrants_NarrowNeverWiden(t *testing.T) {
	e := servedEnv(t)
	planPath := filepath.Join(t.TempDir(), "g.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: grants
tasks:
  - {id: same, subagent: worker, grants: {commands: ["sh -c *"]}}
  - {id: none, subagent: worker, grants: {commands: []}}
  - {id: widen, subagent: worker, grants: {tools: [write_file]}}
`), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	run := waitRun(t, e.client(), runID, time.Minute)
	got := map[string]api.Task{}
	for _, task := range run.Tasks {
		got[task.ID] = task
	}
	if got["same"].State != lifecycle.TaskSucceeded {
		t.Errorf("same: %+v, want succeeded", got["same"])
	}
	if s := got["none"]; s.State != lifecycle.TaskFailed || s.Reason != "denied" || !strings.Contains(s.Detail, "not granted") {
		t.Errorf("none: %+v, want failed/denied: the command is not granted", s)
	}
	if s := got["widen"]; s.State != lifecycle.TaskFailed || s.Reason != "denied" || !strings.Contains(s.Detail, "write_file") || s.Attempts != 1 {
		t.Errorf("widen: %+v, want failed/denied naming write_file after one attempt", s)
	}
}
