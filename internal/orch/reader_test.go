package orch_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/store"
)

// TestReader_AgreesWithStatus runs a plan whose tasks succeed with usage, fail with a detail
// and ask a question, and reads it back through a Reader over a read-only connection: every
// piece agrees with what Engine.Status says of the same run.
func TestReader_AgreesWithStatus(t *testing.T) {
	h := start(t, "", newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch a.TaskID {
		case "bad":
			return orch.Outcome{State: api.TaskFailed, Reason: "denied", Detail: "repository /x/y is not a directory"}
		case "ask":
			return orch.Outcome{State: api.TaskNeedsInput, Question: "which?"}
		}
		return orch.Outcome{State: api.TaskSucceeded, Usage: &budget.Usage{InputTokens: 10, OutputTokens: 3, ModelCalls: 1, CostUSD: 0.1}}
	}))
	p := mkPlan(t, "mixed", 4, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}, Locks: []any{"l"}}, spec{ID: "bad"}, spec{ID: "ask"},
		spec{ID: "after", Deps: []string{"bad"}}, spec{ID: "c", Deps: []string{"a"}})
	id := h.submit(p)
	want := h.wait(id, api.RunFailed, api.RunNeedsInput)
	ro, err := store.OpenReadOnly(context.Background(), h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r := orch.NewReader(ro.SQL())
	ctx := context.Background()

	run, err := r.Run(ctx, "mixed")
	if err != nil || run.ID != id || run.State != want.State {
		t.Fatalf("Run by name = %+v, %v; want run %s %s", run, err, id, want.State)
	}
	counts, total, err := r.Counts(ctx, id)
	if err != nil || total != want.Total || !cmp.Equal(counts, want.Counts) {
		t.Errorf("Counts = %v, %d, %v; want %v, %d", counts, total, err, want.Counts, want.Total)
	}
	u, err := r.Usage(ctx, id)
	if err != nil || !cmp.Equal(u, want.Usage) {
		t.Errorf("Usage = %+v, %v; want %+v", u, err, want.Usage)
	}
	rows, err := r.Tasks(ctx, id, 1, 3)
	if err != nil || len(rows) != 3 || rows[0].Index != 1 || rows[0].ID != "b" {
		t.Fatalf("Tasks(1, 3) = %+v, %v", rows, err)
	}
	for _, row := range rows {
		w := want.Tasks[row.Index]
		if row.ID != w.ID || row.State != w.State || row.Attempts != w.Attempts || row.DispatchID != w.DispatchID || row.Detail != w.Detail || row.Reason != w.Reason {
			t.Errorf("task row %+v, Status says %+v", row.Task, w)
		}
	}
	asking, err := r.TasksIn(ctx, id, api.TaskNeedsInput, 10)
	if err != nil || len(asking) != 1 || asking[0].ID != "ask" || asking[0].Question != "which?" {
		t.Errorf("TasksIn(needs_input) = %+v, %v", asking, err)
	}
	bad, err := r.Task(ctx, id, "bad")
	if err != nil || bad.Detail != "repository /x/y is not a directory" || bad.Index != 2 {
		t.Errorf("Task(bad) = %+v, %v", bad, err)
	}
	if _, err := r.Task(ctx, id, "nope"); err == nil {
		t.Error("a task that does not exist was found")
	}
	atts, err := r.Attempts(ctx, id, 0)
	if err != nil || !cmp.Equal(atts, want.Tasks[0].Dispatches) {
		t.Errorf("Attempts(a) = %v, %v; want %v", atts, err, want.Tasks[0].Dispatches)
	}
	in, err := r.AttemptsIn(ctx, id, 0, 1)
	if err != nil || !cmp.Equal(in[0], want.Tasks[0].Dispatches) || !cmp.Equal(in[1], want.Tasks[1].Dispatches) || len(in) != 2 {
		t.Errorf("AttemptsIn(0, 1) = %v, %v", in, err)
	}
	runs, err := r.AttemptRuns(ctx, []string{want.Tasks[0].DispatchID, "not-an-attempt"})
	if err != nil || len(runs) != 1 || runs[want.Tasks[0].DispatchID] != id {
		t.Errorf("AttemptRuns = %v, %v", runs, err)
	}
	named, err := r.TasksNamed(ctx, id, []string{"c", "a", "nope"})
	if err != nil || len(named) != 2 || named[0].ID != "a" || named[1].ID != "c" || named[1].Index != 5 {
		t.Errorf("TasksNamed = %+v, %v", named, err)
	}
	shape, err := r.Shape(ctx, id)
	if err != nil || len(shape) != len(want.Tasks) {
		t.Fatalf("Shape = %d tasks, %v; want %d", len(shape), err, len(want.Tasks))
	}
	for i, o := range shape {
		w := want.Tasks[i]
		if o.ID != w.ID || o.Subagent != w.Subagent || !cmp.Equal(o.Deps, w.DependsOn, cmpopts.EquateEmpty()) {
			t.Errorf("Shape task %d = %+v, Status says %+v", i, o, w)
		}
	}
	at, err := r.TasksAt(ctx, id, []int{5, 0, 99})
	if err != nil || len(at) != 2 || at[0].ID != "a" || at[1].ID != "c" {
		t.Errorf("TasksAt = %+v, %v", at, err)
	}
}
