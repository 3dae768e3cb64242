package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plan names its workspace; every task works on the commit pinned at submit. The run's
// identity covers the workspace and commit: the same submission returns the run, another
// revision starts a new one under the same name.
func TestOrchSubmit_PlanWorkspace(t *testing.T) {
	e := servedEnv(t)
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "VERSION"), []byte("one\n"), 0o644))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "one")
	gitIn(t, repo, "branch", "release/1")
	must(t, os.WriteFile(filepath.Join(repo, "VERSION"), []byte("two\n"), 0o644))
	gitIn(t, repo, "commit", "-qam", "two")
	e.run("workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*")
	e.editors(map[string]string{"stamp": `cp VERSION seen.txt`})
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte("version: 1\nname: stamped\nworkspace: app\ntasks:\n  - {id: a, subagent: stamp}\n"), 0o644))

	first := strings.TrimSpace(e.runOut("orch", "submit", plan, "--wait"))
	status := e.run("orch", "status", first, "-o", "json")
	if !strings.Contains(status, `"workspace": "app@sha256:`) || strings.Contains(status, repo) {
		t.Errorf("status of a workspace run: want the workspace and no path:\n%s", status)
	}
	out := e.run("orch", "patches", first, "--combined")
	if strings.Count(out, "+two") != 1 || strings.Contains(out, "+one") {
		t.Errorf("the task did not see main's tree:\n%s", out)
	}

	again := e.run("orch", "submit", plan)
	if !strings.HasPrefix(again, first) || !strings.Contains(again, "already exists: the same plan on the same workspace and commit") {
		t.Errorf("identical resubmission: %s", again)
	}
	other := strings.TrimSpace(e.runOut("orch", "submit", plan, "--workspace", "app@release/1", "--wait"))
	if other == first {
		t.Fatalf("another revision returned the first run %s", first)
	}
	if out := e.run("orch", "patches", "stamped", "--combined"); !strings.Contains(out, "+one") {
		t.Errorf("the name means the newest run (release/1):\n%s", out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--workspace", "docs"}, `the plan names workspace "app" and the submission "docs"`},
		{[]string{"--repo", repo}, `the plan works on workspace "app"; a repository cannot replace it`},
		{[]string{"--workspace", "app@feature"}, `revision "feature" is not allowed`},
	} {
		if msg := e.runFail(append([]string{"orch", "submit", plan}, tt.args...)...); !strings.Contains(msg, tt.want) {
			t.Errorf("submit %v: %s, want %q", tt.args, msg, tt.want)
		}
	}
	must(t, os.WriteFile(plan, []byte("version: 1\nname: lost\nworkspace: nope\ntasks:\n  - {id: a, subagent: stamp}\n"), 0o644))
	if msg := e.runFail("orch", "submit", plan); !strings.Contains(msg, `workspace "nope" not found; known: app`) {
		t.Errorf("unknown workspace: %s", msg)
	}
}
