package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCapabilitySuggest_LearnPlanRunEndToEnd is the suggest test for a run (`--run RUN`) of
// a plan whose tasks say learn: true, through the real binary, orch serve and bubblewrap:
// fetcher holds no grant; the run's three learn tasks finish with their command and requests
// recorded as would-deny (no refusal); suggest over the run proposes, register takes it as
// is, and the same three tasks in a plain run (no learn) finish with zero refusals while a
// fourth, different task is refused. Failed before: learn was not a key of a plan.
func TestCapabilitySuggest_LearnPlanRunEndToEnd(t *testing.T) {
	e := newSuggestE2E(t, true)
	bin := builtAgora(t)
	orch := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range e.env {
			c.Env = append(c.Env, k+"="+v)
		}
		c.Dir = e.dir
		return c
	}
	serve := orch("orch", "serve")
	startServing(t, serve)
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	paths := []string{"/repos/acme/a", "/repos/acme/b", "/issues/1"}
	plan := func(name string, learn bool, paths ...string) string {
		var b strings.Builder
		b.WriteString("version: 1\nname: " + name + "\ntasks:\n")
		for i, p := range paths {
			b.WriteString("  - {id: t" + string(rune('a'+i)) + ", subagent: fetcher, input: {path: \"" + p + "\"}")
			if learn {
				b.WriteString(", learn: true")
			}
			b.WriteString("}\n")
		}
		f := filepath.Join(t.TempDir(), name+".yaml")
		writeFile(t, f, b.String())
		return f
	}
	// runTasks submits a plan, waits for it, and returns each task's dispatch and how many of
	// its entries refused something.
	runTasks := func(file string, learn bool) (string, map[string]int, string) {
		out, err := orch("orch", "submit", file, "--repo", e.repo, "--wait").Output()
		id := strings.TrimSpace(string(out))
		st, _ := orch("orch", "status", id, "-o", "json").Output()
		var run struct {
			State string `json:"state"`
			Tasks []struct {
				ID         string `json:"id"`
				DispatchID string `json:"dispatch_id"`
				Learn      bool   `json:"learn"`
			} `json:"tasks"`
		}
		if jerr := json.Unmarshal(st, &run); jerr != nil {
			t.Fatalf("run %q (%v): status %s: %v", id, err, st, jerr)
		}
		log := e.must("audit", "log", "-o", "json")
		n := map[string]int{}
		for _, task := range run.Tasks {
			n[task.ID] = refusals(t, log, task.DispatchID)
			if learn != task.Learn {
				t.Errorf("run %s task %s: learn %v in orch status", id, task.ID, task.Learn)
			}
		}
		return id, n, run.State
	}

	runID, n, state := runTasks(plan("learning", true, paths...), true)
	if state != "succeeded" {
		t.Fatalf("the learn run ended %s", state)
	}
	for task, k := range n {
		if k != 0 {
			t.Errorf("learn task %s: %d refusals, want 0 (recorded as would-deny)", task, k)
		}
	}
	capDir := filepath.Join(e.dir, "learned-run")
	out := e.must("capability", "suggest", "--run", runID, "--narrow", "--out", capDir)
	for _, want := range []string{"/repos/acme/a", "/issues/1", "+ egress: "} {
		if !strings.Contains(out, want) {
			t.Errorf("suggest --run's list lacks %q:\n%s", want, out)
		}
	}
	e.must("capability", "register", "learned", "--from", capDir)
	e.must("subagent", "register", "fetcher", "--runtime", "exec", "--command", suggestRun, "--capability", "script,learned")

	_, n, state = runTasks(plan("again", false, paths...), false)
	if state != "succeeded" {
		t.Errorf("the plain run under the suggested grant ended %s", state)
	}
	for task, k := range n {
		if k != 0 {
			t.Errorf("task %s under the suggested grant: %d refusals, want 0", task, k)
		}
	}
	_, n, _ = runTasks(plan("fourth", false, "/repos/acme/c"), false)
	if n["ta"] != 1 {
		t.Errorf("a fourth, different task: %d refusals, want 1 (--narrow admits exactly the evidence)", n["ta"])
	}
}

// exitStderr is the stderr of a failed command, if it kept one.
func exitStderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
