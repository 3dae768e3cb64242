package service_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
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
	if byID["impl"].State != lifecycle.TaskSucceeded || rename.State != lifecycle.TaskSucceeded {
		t.Fatalf("run %s:\n%s\n%+v", run.State, out, run.Tasks)
	}
	if revert.State != lifecycle.TaskFailed || revert.Reason != "verify-failed" || revert.Verdict == nil || !slices.Contains(revert.Verdict.OutsidePaths, "lib.go") {
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

// A stacked task that asks a question: its answer is another attempt, and it starts from the
// same stack as the one that asked (the run re-sends the stack with the answer); the answer's
// patch is its own work on that base, and a task stacked on the asking task takes the
// answer's work. The run's bundle verifies.
func TestRedTeam44S_StackedTaskAnswered(t *testing.T) {
	e := servedEnv(t)
	repo, _ := stackRepo(t)
	e.editors(map[string]string{
		"impl":  "printf 'func Retry() {}\\n' > lib.go",
		"after": "grep -q Retry lib.go && test -f answer.txt && echo after > after.txt",
	})
	e.run("subagent", "register", "asker", "--capability", "shell", "--command",
		`sh -c 'grep -q Retry lib.go || exit 7; case "$AGORA_INPUT_JSON" in *agora_resume*) echo red > answer.txt;; *) echo asked > asked.txt; printf %s "{\"question\":\"Which color?\"}" > "$AGORA_OUT/needs_input.json";; esac'`)
	plan := filepath.Join(t.TempDir(), "ask.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: ask
tasks:
  - {id: impl, subagent: impl}
  - {id: ask, subagent: asker, base: [impl]}
  - {id: after, subagent: after, base: [ask]}
`), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", plan, "--repo", repo), "\n")[0])
	c := e.client()
	agoratest.Eventually(t, 2*time.Minute, "the run's question", func() error {
		r, err := c.Status(t.Context(), runID)
		must(t, err)
		if lifecycle.RunEnded(r.State) {
			t.Fatalf("run %s never asked: %+v", r.State, r.Tasks)
		}
		if r.State != lifecycle.RunNeedsInput {
			return fmt.Errorf("run %s", r.State)
		}
		return nil
	})
	e.run("orch", "answer", runID, "ask", "--answer", "red")
	run := waitRun(t, c, runID, 2*time.Minute)
	_, byID := e.statusOf(runID)
	ask := byID["ask"]
	if run.State != lifecycle.RunSucceeded || len(ask.Dispatches) != 2 {
		t.Fatalf("run %s: %+v", run.State, run.Tasks)
	}
	asked, answered := e.describe(ask.Dispatches[0]), e.describe(ask.Dispatches[1])
	if answered.StackBase == "" || answered.StackBase != asked.StackBase {
		t.Errorf("the answer's stack_base %q, the question's %q", answered.StackBase, asked.StackBase)
	}
	impl := byID["impl"].DispatchID
	for _, r := range []stackRecord{asked, answered} {
		var from []string
		for _, in := range r.Inputs {
			if in.Stack {
				from = append(from, in.Dir+"="+in.FromDispatch)
			}
		}
		if !slices.Equal(from, []string{"impl=" + impl}) {
			t.Errorf("dispatch %s's stack %q, want impl's %s", r.ID, from, impl)
		}
	}
	p := e.run("dispatch", "patch", answered.ID)
	if !strings.Contains(p, "+++ b/answer.txt") || strings.Contains(p, "lib.go") || strings.Contains(p, "asked.txt") {
		t.Errorf("the answer's patch is not its own work on its base:\n%s", p)
	}
	var from []string
	for _, in := range e.describe(byID["after"].DispatchID).Inputs {
		if in.Stack {
			from = append(from, in.Dir+"="+in.FromDispatch)
		}
	}
	if !slices.Equal(from, []string{"impl=" + impl, "ask=" + answered.ID}) {
		t.Errorf("after's stack %q, want impl's and ask's answer", from)
	}
	e.auditRun(runID)
}
