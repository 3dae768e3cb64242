package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// A stacked task whose agent removes its base's reviewed work (deletes the file, or renames
// it away) does it in its own patch, where everyone who judges that patch sees it: a gate
// whose changes do not admit the base's file is red naming it; without a gate the task
// succeeds, and `orch patches --to` and `--branch` show the removal as that task's own,
// after its base's commit, never a branch tip that silently lacks the base's work.
func TestRedTeam44S_StackedTaskRemovingItsBasesWork(t *testing.T) {
	e := servedEnv(t)
	repo, _ := stackRepo(t)
	e.editors(map[string]string{
		"impl":   "printf 'func Retry() {}\\n' > lib.go",
		"revert": "rm lib.go && echo notes > notes.md",
		"rename": "mv lib.go old.go",
	})
	plan := filepath.Join(t.TempDir(), "undo.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: undo
tasks:
  - {id: impl, subagent: impl}
  - {id: revert, subagent: revert, base: [impl], verify: {command: ["true"], changes: [notes.md]}}
  - {id: rename, subagent: rename, base: [impl]}
`), 0o644))
	cmd := exec.Command(agoraBin, "orch", "submit", plan, "--repo", repo, "--wait")
	cmd.Env = e.vars
	out, _ := cmd.CombinedOutput()
	run, byID := e.statusOf("undo")
	revert, rename := byID["revert"], byID["rename"]
	if byID["impl"].State != api.TaskSucceeded || rename.State != api.TaskSucceeded {
		t.Fatalf("run %s:\n%s\n%+v", run.State, out, run.Tasks)
	}
	if revert.State != api.TaskFailed || revert.Reason != "verify-failed" || revert.Verdict == nil || !slices.Contains(revert.Verdict.OutsidePaths, "lib.go") {
		t.Errorf("revert: %s %s, verdict %+v", revert.State, revert.Reason, revert.Verdict)
	}

	dir := filepath.Join(t.TempDir(), "review")
	table := e.run("orch", "patches", "undo", "--to", dir)
	if !regexpLine(table, "rename", "impl") {
		t.Errorf("patches --to:\n%s", table)
	}
	b, err := os.ReadFile(filepath.Join(dir, "rename.patch"))
	must(t, err)
	// The worker's patch names a pure rename as one (git apply takes it as such).
	if p := string(b); !strings.Contains(p, "rename from lib.go\nrename to old.go\n") &&
		!(strings.Contains(p, "diff --git a/lib.go b/lib.go\ndeleted file mode") && strings.Contains(p, "+++ b/old.go")) {
		t.Errorf("rename.patch does not show lib.go going:\n%s", b)
	}
	e.run("orch", "patches", "undo", "--branch", "agora/undo")
	if log := gitIn(t, repo, "log", "--reverse", "--format=%(trailers:key=Agora-Task,valueonly,separator=)", "main..agora/undo"); log != "impl\nrename" {
		t.Errorf("branch commits %q, want impl then rename", log)
	}
	if st := gitIn(t, repo, "show", "--name-status", "--no-renames", "--format=", "agora/undo"); st != "D\tlib.go\nA\told.go" && st != "A\told.go\nD\tlib.go" {
		t.Errorf("rename's commit, as a person reads it:\n%s", st)
	}
}
