package service_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
)

// TestAnswer_RetriedTaskAnswersAgain: a question is answered once (#26 finding 7), but a run
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
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if r := status(); r.State == state {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s never became %s: %+v", runID, state, status())
			}
		}
	}
	parent := waitRun(api.RunNeedsInput).Tasks[0].DispatchID
	e.run("orch", "answer", runID, "ask", "--answer", "red")
	r := waitRun(api.RunFailed)
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
