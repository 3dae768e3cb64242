package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLearnTask_PersonOnly: a plan task's learn: true runs as a learn dispatch
// when a person submits the plan (`agora orch submit`): the dispatch is marked learn, the
// run's status marks the task (JSON "learn": true, the table's "(learn)"), and its patch makes
// no branch without --include-learn. The same plan submitted as an MCP client ("mcp:" actor,
// what the MCP server submits as) is refused by the service naming why, and no run exists.
// A plain task on a target in mode: learn is marked in the status too, from its dispatch.
// Failed before: learn was an unknown key of a plan.
func TestLearnTask_PersonOnly(t *testing.T) {
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
	write := func(name string) {
		must(t, os.WriteFile(plan, []byte("version: 1\nname: "+name+`
tasks:
  - {id: learned, subagent: add-a, learn: true}
  - {id: plain, subagent: add-b, depends_on: [learned]}
  - {id: bytarget, subagent: add-b, target: learning}
`), 0o644))
	}

	write("viamcp")
	msg := e.runFail("--actor", "mcp:lead", "orch", "submit", plan, "--repo", repo)
	if !strings.Contains(msg, "MCP client cannot start a learn dispatch") || !strings.Contains(msg, "learned") {
		t.Errorf("an MCP client's plan with learn: %s", msg)
	}
	if runs := e.run("orch", "runs", "-o", "json"); strings.Contains(runs, "viamcp") {
		t.Errorf("the refused plan started a run:\n%s", runs)
	}

	write("byperson")
	if out := e.run("orch", "submit", plan, "--repo", repo, "--wait"); !strings.Contains(out, "succeeded") {
		t.Fatalf("a person's run with a learn task:\n%s", out)
	}
	run, byID := e.statusOf("byperson")
	if !byID["learned"].Learn || byID["plain"].Learn {
		t.Errorf("the service's status: learned %v plain %v, want true false", byID["learned"].Learn, byID["plain"].Learn)
	}
	st := e.run("orch", "status", run.ID, "-o", "json")
	for _, want := range []string{`"id": "learned"`, `"id": "bytarget"`} {
		i := strings.Index(st, want)
		if i < 0 {
			t.Fatalf("status has no %s:\n%s", want, st)
		}
		end := strings.Index(st[i:], "}")
		if !strings.Contains(st[i:i+end], `"learn": true`) {
			t.Errorf("orch status -o json does not mark %s learn:\n%s", want, st[i:i+end])
		}
	}
	if table := e.run("orch", "status", run.ID); !strings.Contains(table, "learned (learn)") || !strings.Contains(table, "bytarget (learn)") || strings.Contains(table, "plain (learn)") {
		t.Errorf("orch status's table marks the wrong tasks:\n%s", table)
	}
	list := e.run("dispatch", "list", "-o", "json")
	if n := strings.Count(list, `"learn": true`); n != 2 {
		t.Errorf("dispatch list -o json marks %d learn dispatches, want 2:\n%s", n, list)
	}
	if msg := e.runFail("orch", "patches", run.ID, "--branch", "agora/byperson"); !strings.Contains(msg, "--include-learn") {
		t.Errorf("orch patches --branch of a run with a learn task: %s", msg)
	}
}
