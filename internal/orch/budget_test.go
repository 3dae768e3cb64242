package orch_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// budgetPlan is a chain of n tasks (t1 <- t2 <- ...), so they run one after another, under a
// run budget of calls model calls; t2 narrows its attempts to 1 call.
func budgetPlan(tb testing.TB, name string, n int, calls int64) *plan.Plan {
	tb.Helper()
	var tasks []map[string]any
	for i := 1; i <= n; i++ {
		t := map[string]any{"id": "t" + string(rune('0'+i)), "subagent": "worker"}
		if i > 1 {
			t["depends_on"] = []string{"t" + string(rune('0'+i-1))}
		}
		if i == 2 {
			t["budget"] = map[string]any{"model_calls": 1}
		}
		tasks = append(tasks, t)
	}
	b, _ := json.Marshal(map[string]any{"version": 1, "name": name, "budget": map[string]any{"model_calls": calls, "usd": 1}, "tasks": tasks})
	p, err := plan.Parse(name+".json", b)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// usesTwoCalls succeeds after two model calls costing $0.1 each.
func usesTwoCalls(orch.Attempt) orch.Outcome {
	return orch.Outcome{State: lifecycle.TaskSucceeded, Usage: &budget.Usage{InputTokens: 100, OutputTokens: 10, ModelCalls: 2, CostUSD: 0.2}}
}

// TestBudget_RunStopsFiring: a plan whose run budget is spent fires no further task; the
// tasks not fired fail budget-exceeded (their dependents skipped), the run ends failed with
// the reason, its usage is the sum of its attempts', and each attempt was handed what was
// left of the run's budget and the task's narrowing.
func TestBudget_RunStopsFiring(t *testing.T) {
	ex := newFakeExec(usesTwoCalls)
	h := start(t, "", ex)
	id := h.runToEnd(budgetPlan(t, "capped", 4, 4))
	r := h.wait(id)
	if r.State != lifecycle.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	states := taskStates(r)
	if states["t1"] != lifecycle.TaskSucceeded || states["t2"] != lifecycle.TaskSucceeded || states["t3"] != lifecycle.TaskFailed || states["t4"] != lifecycle.TaskSkipped {
		t.Fatalf("task states %v", states)
	}
	if got := r.Tasks[2]; got.Reason != "budget-exceeded" || !strings.Contains(got.Detail, "model call budget spent: 4 of 4 calls") || got.Attempts != 0 {
		t.Errorf("t3: %s %q after %d attempts", got.Reason, got.Detail, got.Attempts)
	}
	if r.Usage == nil || *r.Usage != (budget.Usage{InputTokens: 200, OutputTokens: 20, ModelCalls: 4, CostUSD: 0.4}) {
		t.Errorf("run usage %+v", r.Usage)
	}
	if r.Budget == nil || r.Budget.ModelCalls != 4 {
		t.Errorf("run budget %+v", r.Budget)
	}
	atts := ex.attempts()
	if len(atts) != 2 {
		t.Fatalf("%d attempts fired, want 2", len(atts))
	}
	if c := atts[0].Ceilings; len(c) != 1 || c[0].Budget != (budget.Budget{ModelCalls: 4, USD: 1}) {
		t.Errorf("first attempt's ceilings %+v, want the whole run budget", c)
	}
	if c := atts[1].Ceilings; len(c) != 1 || c[0].Budget.ModelCalls != 2 || c[0].Budget.USD < 0.79 || c[0].Budget.USD > 0.81 {
		t.Errorf("second attempt's ceilings %+v, want what is left: 2 calls, $0.8", c)
	}
	if atts[1].Budget != (budget.Budget{ModelCalls: 1}) {
		t.Errorf("second attempt's budget %+v, want the task's narrowing", atts[1].Budget)
	}
	ended := auditOf(t, h, id, "orch.run.ended")
	if len(ended) != 1 || ended[0].Details["reason"] != "budget-exceeded" {
		t.Errorf("orch.run.ended entries %v, want one with reason budget-exceeded", ended)
	}
}

// TestBudget_RunUsageSurvivesRestart: the run's usage is derived from the attempts' rows,
// committed with each attempt's end, so an engine opened again on the same orch.db knows it
// and still fires nothing over the budget.
func TestBudget_RunUsageSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch.db")
	release := make(chan struct{})
	first := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "t2" {
			<-release // held open while the engine stops
			return orch.Outcome{State: lifecycle.TaskCancelled}
		}
		return usesTwoCalls(a)
	})
	h := start(t, path, first)
	id := h.submit(budgetPlan(t, "restart", 3, 3))
	deadline := time.Now().Add(10 * time.Second)
	for len(first.attempts()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("t2 never fired: %d attempts", len(first.attempts()))
		}
		time.Sleep(2 * time.Millisecond)
	}
	h.stop()
	close(release)

	// t2 re-attaches and ends with one more call: 3 of 3. t3 must not fire.
	second := newFakeExec(func(a orch.Attempt) orch.Outcome {
		return orch.Outcome{State: lifecycle.TaskSucceeded, Usage: &budget.Usage{ModelCalls: 1, CostUSD: 0.1}}
	})
	h2 := start(t, path, second)
	r := h2.wait(id)
	if r.Usage == nil || r.Usage.ModelCalls != 3 {
		t.Fatalf("usage after restart %+v, want t1's 2 calls and t2's 1", r.Usage)
	}
	if s := taskStates(r); s["t3"] != lifecycle.TaskFailed || r.Tasks[2].Reason != "budget-exceeded" {
		t.Fatalf("t3 %s %s, want failed budget-exceeded", s["t3"], r.Tasks[2].Reason)
	}
	for _, a := range second.attempts() {
		if a.TaskID == "t3" {
			t.Fatal("t3 fired after the restart although the run's budget was spent")
		}
	}
}

// auditOf returns the orch.db audit entries of kind about run id.
func auditOf(t *testing.T, h *harness, id, kind string) []audit.Record {
	t.Helper()
	all, err := audit.List(context.Background(), h.db.SQL(), audit.ListOptions{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, a := range all {
		if a.Subject == "run/"+id {
			out = append(out, a)
		}
	}
	return out
}
