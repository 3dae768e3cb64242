package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLearn_NoHandOffNoBranchWithoutIncludeLearn: a plan task on a target in mode:
// learn runs as a learn dispatch; its patch does not feed the dependent task's input (the
// task fails naming --include-learn), and `orch patches --branch`, `--combined` and `dispatch
// patch --branch` refuse it naming --include-learn, creating nothing; with --include-learn
// the branch is made. Failed before: nothing told a learn dispatch's patch apart.
func TestLearn_NoHandOffNoBranchWithoutIncludeLearn(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	e.writeConfig("targets:\n  learning:\n    mode: learn\n")
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("app\n"), 0o644))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
	e.editors(map[string]string{"add-a": "echo a > a.txt", "add-b": "echo b > b.txt"})
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: learned
tasks:
  - {id: first, subagent: add-a, target: learning}
`), 0o644))
	out := e.run("orch", "submit", plan, "--repo", repo, "--wait")
	if !strings.Contains(out, "succeeded") {
		t.Fatalf("the learn run did not succeed:\n%s", out)
	}
	for _, args := range [][]string{
		{"orch", "patches", "learned", "--branch", "agora/learned"},
		{"orch", "patches", "learned", "--combined"},
	} {
		if msg := e.runFail(args...); !strings.Contains(msg, "learn dispatch") || !strings.Contains(msg, "--include-learn") {
			t.Errorf("%v: %s, want a refusal naming --include-learn", args, msg)
		}
	}
	if refs := gitIn(t, repo, "for-each-ref", "--format=%(refname)", "refs/heads/agora/"); refs != "" {
		t.Fatalf("a refused learn branch created %s", refs)
	}
	out = e.run("orch", "patches", "learned", "--branch", "agora/learned", "--include-learn")
	if n := gitIn(t, repo, "rev-list", "--count", "main..agora/learned"); n != "1" {
		t.Errorf("--include-learn: %s commits; said %s", n, out)
	}
	list := e.run("dispatch", "list", "-o", "json")
	if !strings.Contains(list, `"learn": true`) && !strings.Contains(list, `"learn":true`) {
		t.Errorf("dispatch list -o json does not mark the learn dispatch:\n%s", list)
	}

	// One learn dispatch: dispatch patch --branch is refused the same way.
	id := strings.TrimSpace(e.runOut("dispatch", "run", "--subagent", "add-b", "--repo", repo, "--learn"))
	if msg := e.runFail("dispatch", "patch", id, "--branch", "agora/b"); !strings.Contains(msg, "--include-learn") {
		t.Errorf("dispatch patch --branch of a learn dispatch: %s", msg)
	}
	e.run("dispatch", "patch", id, "--branch", "agora/b", "--include-learn")
	if desc := e.run("dispatch", "describe", id); !strings.Contains(desc, "mode:      learn") {
		t.Errorf("describe does not say learn:\n%s", desc)
	}

	// A hand-off: the dependent task's input from a learn task is refused.
	must(t, os.WriteFile(plan, []byte(`version: 1
name: handoff
tasks:
  - {id: first, subagent: add-a, target: learning}
  - id: second
    subagent: add-b
    depends_on: [first]
    needs: {up: {from: first, select: patch}}
`), 0o644))
	out = e.runFailCode(3, "orch", "submit", plan, "--repo", repo, "--wait")
	st := e.run("orch", "status", "handoff", "-o", "json")
	if !strings.Contains(st, "--include-learn") {
		t.Errorf("the hand-off from a learn task was not refused naming --include-learn:\n%s\n%s", out, st)
	}
}

// TestLearn_MCPRunCannotLearn: a run whose actor is an MCP client's ("mcp:" + its name,
// what the MCP server submits as) may not start a learn dispatch: its task on a target in
// mode: learn fails saying an MCP client cannot learn, and nothing ran; the same plan from a
// person runs. Failed before: the task ran as a learn dispatch.
func TestLearn_MCPRunCannotLearn(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	e.writeConfig("targets:\n  learning:\n    mode: learn\n")
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	e.editors(map[string]string{"add-a": "echo a > a.txt"})
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(plan, []byte("version: 1\nname: viamcp\ntasks:\n  - {id: first, subagent: add-a, target: learning}\n"), 0o644))
	out := e.runFailCode(3, "--actor", "mcp:lead", "orch", "submit", plan, "--wait")
	// The task's reason, from the run's status: --wait shows the task's events only when
	// its watch began before the task ended.
	if st := e.run("orch", "status", "viamcp", "-o", "json"); !strings.Contains(st, "MCP client cannot start a learn dispatch") {
		t.Errorf("an MCP run's learn task:\n%s\n%s", out, st)
	}
	if list := e.run("dispatch", "list", "-o", "json"); strings.Contains(list, `"learn": true`) {
		t.Errorf("an MCP run started a learn dispatch:\n%s", list)
	}
	must(t, os.WriteFile(plan, []byte("version: 1\nname: byperson\ntasks:\n  - {id: first, subagent: add-a, target: learning}\n"), 0o644))
	if out := e.run("orch", "submit", plan, "--wait"); !strings.Contains(out, "succeeded") {
		t.Errorf("a person's learn run:\n%s", out)
	}
}
