package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestAnswer_RetriedTaskAnswersAgain: a question is answered once, but a run
// whose answered attempt failed retries the task with the same answer: the retry's attempt
// answers the same parent again (the parent names the newest child; the second
// dispatch.answered entry says which child it replaces), and is not refused as an answer
// given twice. The run's bundle still verifies: the answered attempt ended needs_input, and
// its manifest says so.
func TestAnswer_RetriedTaskAnswersAgain(t *testing.T) {
	e := servedEnv(t)
	e.run("subagent", "register", "flaky", "--capability", "shell", "--command",
		`sh -c 'case "$AGORA_INPUT_JSON" in *agora_resume*) exit 3;; *) printf %s "{\"question\":\"Which color?\"}" > "$AGORA_OUT/needs_input.json";; esac'`)
	plan := filepath.Join(e.home, "..", "flaky.yaml")
	must(t, os.WriteFile(plan, []byte(`version: 1
name: flaky
tasks:
  - id: ask
    subagent: flaky
    retry: {max_attempts: 2, initial_backoff: 50ms, max_backoff: 100ms}
`), 0o600))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", plan), "\n")[0])
	status := func() api.Run {
		t.Helper()
		var r api.Run
		cmd := exec.Command(agoraBin, "orch", "status", runID, "-o", "json")
		cmd.Env = e.vars
		out, err := cmd.Output()
		must(t, err)
		must(t, json.Unmarshal(out, &r))
		return r
	}
	waitRun := func(state string) api.Run {
		t.Helper()
		var r api.Run
		if !agoratest.Poll(60*time.Second, func() bool { r = status(); return r.State == state }) {
			t.Fatalf("run %s never became %s: %+v", runID, state, r)
		}
		return r
	}
	parent := waitRun(lifecycle.RunNeedsInput).Tasks[0].DispatchID
	e.run("orch", "answer", runID, "ask", "--answer", "red")
	r := waitRun(lifecycle.RunFailed)
	if n := len(r.Tasks[0].Dispatches); n != 3 {
		t.Fatalf("task ask has %d attempts, want 3 (the question, the answer, its retry): %+v", n, r.Tasks[0])
	}

	type rec struct {
		ID, State, Reason string
		ParentID          string `json:"parent_id"`
		ChildID           string `json:"child_id"`
	}
	show := func(id string) rec {
		t.Helper()
		var x rec
		must(t, json.Unmarshal([]byte(e.run("dispatch", "describe", id, "-o", "json")), &x))
		return x
	}
	first, retry := show(r.Tasks[0].Dispatches[1]), show(r.Tasks[0].Dispatches[2])
	for _, c := range []rec{first, retry} {
		if c.ParentID != parent || c.State != "failed" || c.Reason != "worker-failed" {
			t.Errorf("attempt %+v, want a failed (worker-failed, not denied) answer to %s", c, parent)
		}
	}
	if p := show(parent); p.State != "answered" || p.ChildID != retry.ID {
		t.Errorf("parent = %+v, want answered naming the retry %s", p, retry.ID)
	}
	var entries []struct {
		Kind, Subject string
		Details       map[string]any
	}
	must(t, json.Unmarshal([]byte(e.run("audit", "log", "-o", "json", "--kind", "dispatch.answered")), &entries))
	var answers []map[string]any
	for _, en := range entries {
		if en.Subject == "dispatch/"+parent {
			answers = append(answers, en.Details)
		}
	}
	if len(answers) != 2 || answers[1]["retry_of"] != first.ID || answers[0]["via"] != "orch" {
		t.Errorf("dispatch.answered entries of %s: %v, want the answer and its retry (retry_of %s)", parent, answers, first.ID)
	}

	e.run("orch", "seal", runID)
	bundle := filepath.Join(e.home, "..", "flaky-bundle.json")
	e.run("orch", "audit", runID, "--out", bundle)
	cmd := exec.Command(agoraBin, "verify", bundle, "--key", filepath.Join(e.home, "keys", "audit.pub"))
	cmd.Env = append(os.Environ(), "AGORA_HOME=/nonexistent")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("verify of the run's bundle: %v\n%s", err, b)
	}
}

// TestAnswer_Kill9DuringRetryBackoff: serve is killed with SIGKILL while a task whose answered
// attempt failed waits out its retry backoff; after the restart the retry answers the same
// question again (the first attempt's, not the failed answer's), so it runs and fails as the
// agent fails (worker-failed), not refused as an answer to a dispatch that never asked.
func TestAnswer_Kill9DuringRetryBackoff(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	e.run("subagent", "register", "flaky", "--capability", "shell", "--command",
		`sh -c 'case "$AGORA_INPUT_JSON" in *agora_resume*) exit 3;; *) printf %s "{\"question\":\"Which color?\"}" > "$AGORA_OUT/needs_input.json";; esac'`)
	c := e.client()
	for try := 0; ; try++ {
		if try == 5 {
			t.Fatal("in 5 runs no retry backoff lasted long enough to kill serve inside it")
		}
		plan := filepath.Join(e.home, "..", fmt.Sprintf("flaky-%d.yaml", try))
		must(t, os.WriteFile(plan, []byte(fmt.Sprintf(`version: 1
name: flaky-%d
tasks:
  - id: ask
    subagent: flaky
    retry: {max_attempts: 2, initial_backoff: 6s, max_backoff: 6s}
`, try)), 0o600))
		runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", plan), "\n")[0])
		task := func() api.Task {
			t.Helper()
			r, err := c.Status(context.Background(), runID)
			must(t, err)
			return r.Tasks[0]
		}
		agoratest.WaitFor(t, 60*time.Second, "run "+runID+" to need input", func() bool { return task().State == lifecycle.TaskNeedsInput })
		parent := task().DispatchID
		e.run("orch", "answer", runID, "ask", "--answer", "red")
		var tk api.Task
		agoratest.Poll(60*time.Second, func() bool {
			tk = task()
			return tk.State == lifecycle.TaskPending && tk.RetryAt != nil || lifecycle.TaskEnded(tk.State)
		})
		if tk.RetryAt == nil || time.Until(*tk.RetryAt) < time.Second {
			continue // the jittered backoff was too short to kill serve inside it: another run
		}
		must(t, serve.Process.Signal(syscall.SIGKILL))
		serve.Wait()
		serve = e.serve()
		r := waitRun(t, c, runID, time.Minute)
		if r.State != lifecycle.RunFailed || len(r.Tasks[0].Dispatches) != 3 {
			t.Fatalf("run %s after the restart: %s, task %+v; want failed after 3 attempts", runID, r.State, r.Tasks[0])
		}
		var retry struct {
			State, Reason string
			ParentID      string `json:"parent_id"`
		}
		must(t, json.Unmarshal([]byte(e.run("dispatch", "describe", r.Tasks[0].Dispatches[2], "-o", "json")), &retry))
		if retry.ParentID != parent || retry.Reason != "worker-failed" || r.Tasks[0].Reason != "worker-failed" {
			t.Errorf("the retry after the restart: %+v (task reason %q), want a worker-failed answer to %s", retry, r.Tasks[0].Reason, parent)
		}
		return
	}
}
