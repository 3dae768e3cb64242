package orch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/verdict"
)

// taskEntries returns the orch.db audit entries about task of run id, in order.
func taskEntries(t *testing.T, h *harness, id, task string) []audit.Record {
	t.Helper()
	all, err := audit.List(context.Background(), h.db.SQL(), audit.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, a := range all {
		if a.Subject == "run/"+id+"/task/"+task {
			out = append(out, a)
		}
	}
	return out
}

func verifyPlan(t *testing.T, name string) *plan.Plan {
	t.Helper()
	p, err := plan.Parse(name+".yaml", []byte("version: 1\nname: "+name+"\n"+
		"defaults: {verify: {command: [go, test, ./...], protect: ['**/*_test.go']}, retry: {max_attempts: 3, initial_backoff: 1ms}}\n"+
		"tasks:\n  - {id: a, subagent: worker}\n  - {id: b, subagent: worker, depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEngine_VerdictRecorded: the attempt carries the task's verify spec; the outcome's
// verdict is recorded as orch.task.verified right before the entry that ends the attempt (one
// batch), shown by status, and a red one fails the task verify-failed without a retry.
func TestEngine_VerdictRecorded(t *testing.T) {
	red := verdict.Red(verdict.ReasonExit, "exit status 1", 1, []string{"go", "test", "./..."}, time.Second,
		verdict.TailText{Text: "--- FAIL: TestX\n", Total: 16})
	green := verdict.Green([]string{"go", "test", "./..."}, time.Second, verdict.TailText{Text: "ok\n", Total: 3})
	x := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.Verify == nil || strings.Join(a.Verify.Command, " ") != "go test ./..." || a.Verify.Timeout != verdict.DefaultTimeout {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "denied", Detail: "attempt without its verify spec"}
		}
		if a.RunName == "red" && a.TaskID == "a" {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonVerifyFailed, Detail: red.Summary(), Verdict: &red}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded, Verdict: &green}
	})
	h := start(t, "", x)

	id := h.runToEnd(verifyPlan(t, "red"))
	r := h.wait(id)
	if s := taskStates(r); s["a"] != lifecycle.TaskFailed || s["b"] != lifecycle.TaskSkipped {
		t.Fatalf("states %v, want a failed and b skipped", s)
	}
	a := r.Tasks[0]
	if a.Reason != lifecycle.ReasonVerifyFailed || a.Attempts != 1 {
		t.Errorf("a: reason %q after %d attempts, want verify-failed after 1 (never retried)", a.Reason, a.Attempts)
	}
	if a.Verdict == nil || a.Verdict.Passed || a.Verdict.OutputTail != red.OutputTail || a.Verify == nil {
		t.Fatalf("status shows verify %+v verdict %+v, want the red verdict", a.Verify, a.Verdict)
	}
	es := taskEntries(t, h, id, "a")
	var kinds []string
	for _, e := range es {
		kinds = append(kinds, e.Kind)
	}
	i := strings.Index(strings.Join(kinds, ","), "orch.task.verified,orch.task.failed")
	if i < 0 {
		t.Fatalf("entries %v: want orch.task.verified right before orch.task.failed", kinds)
	}
	for _, e := range es {
		switch e.Kind {
		case "orch.task.verified":
			if e.Details["passed"] != false || e.Details["reason"] != verdict.ReasonExit || e.Details["output_sha256"] != red.OutputSHA256 ||
				e.Details["verdict"] != red.Digest() || e.Details["output_tail"] != nil {
				t.Errorf("verified entry %v", e.Details)
			}
		case "orch.task.failed":
			if e.Details["verdict"] != red.Digest() || e.Details["reason"] != lifecycle.ReasonVerifyFailed {
				t.Errorf("failed entry %v", e.Details)
			}
		}
	}

	id = h.runToEnd(verifyPlan(t, "green"))
	r = h.wait(id)
	for _, task := range r.Tasks {
		if task.State != lifecycle.TaskSucceeded || task.Verdict == nil || !task.Verdict.Passed {
			t.Errorf("task %s %s verdict %+v, want succeeded and green", task.ID, task.State, task.Verdict)
		}
	}
	// Read by a process without the engine, too (agora orch status without serve).
	h.stop()
	db := openDB(t, h.path)
	defer db.Close()
	snap, err := orch.ReadStatus(context.Background(), db.SQL(), id)
	if err != nil {
		t.Fatal(err)
	}
	if v := snap.Tasks[0].Verdict; v == nil || v.Digest() != green.Digest() {
		t.Errorf("snapshot verdict %+v", v)
	}
}
