package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestOrchStatus_Snapshot: without an answering serve, orch status reads orch.db read-only
// and says it is a snapshot: while serve still holds the database (its socket gone), and
// after it stopped. Without any orch.db it says why there is nothing to read.
func TestOrchStatus_Snapshot(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	writeFiles(t, map[string]string{filepath.Join(dir, "plan.yaml"): "version: 1\nname: snap\ntasks:\n  - id: only\n    subagent: denied\n"})
	for _, args := range [][]string{{"init"}, {"subagent", "register", "denied", "--runtime", "exec", "--command", "sh -c 'echo hi'"}} {
		if r := runAgora(t, env, args...); r.code != cmdutil.ExitOK {
			t.Fatalf("agora %v: %s", args, r.stderr)
		}
	}
	r := runAgora(t, env, "orch", "status", "snap")
	if r.code != cmdutil.ExitError || !strings.Contains(r.stderr, "the orchestrator is not running") || !strings.Contains(r.stderr, "no run was ever submitted") {
		t.Errorf("no serve, no orch.db: exit %d\n%s", r.code, r.stderr)
	}
	stop := serveOrch(t, env)
	run := strings.TrimSpace(runAgora(t, env, "orch", "submit", filepath.Join(dir, "plan.yaml")).stdout)
	if r := runAgora(t, env, "orch", "watch", run); r.code != cmdutil.ExitWorkerFail {
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	check := func(when string) {
		t.Helper()
		r := runAgora(t, env, "orch", "status", "snap", "-o", "json")
		var got struct {
			ID, State string
			Tasks     []struct{ ID, State string }
		}
		if r.code != cmdutil.ExitOK || json.Unmarshal([]byte(r.stdout), &got) != nil {
			t.Fatalf("%s: exit %d, stdout %q\n%s", when, r.code, r.stdout, r.stderr)
		}
		if got.ID != run || got.State != "failed" || len(got.Tasks) != 1 || got.Tasks[0].State != "failed" {
			t.Errorf("%s: %+v, want run %s failed with its one task failed", when, got, run)
		}
		if !strings.Contains(r.stderr, "the orchestrator is not running: a snapshot of") {
			t.Errorf("%s: stderr does not say it is a snapshot:\n%s", when, r.stderr)
		}
	}
	// serve holds orch.db (and its lock) but nobody can reach it: a WAL reader still reads.
	if err := os.Remove(filepath.Join(env["AGORA_HOME"], "orch", "orch.sock")); err != nil {
		t.Fatal(err)
	}
	check("serve running, socket gone")
	stop()
	check("serve stopped")
}
