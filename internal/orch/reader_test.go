package orch_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/lifecycle"
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
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "denied", Detail: "repository /x/y is not a directory"}
		case "ask":
			return orch.Outcome{State: lifecycle.TaskNeedsInput, Question: "which?"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded, Usage: &budget.Usage{InputTokens: 10, OutputTokens: 3, ModelCalls: 1, CostUSD: 0.1}}
	}))
	p := mkPlan(t, "mixed", 4, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}, Locks: []any{"l"}}, spec{ID: "bad"}, spec{ID: "ask"},
		spec{ID: "after", Deps: []string{"bad"}}, spec{ID: "c", Deps: []string{"a"}})
	id := h.submit(p)
	want := h.wait(id, lifecycle.RunFailed, lifecycle.RunNeedsInput)
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
	asking, err := r.TasksIn(ctx, id, lifecycle.TaskNeedsInput, 10)
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
	if err != nil || len(shape.Tasks) != len(want.Tasks) || len(shape.Added) != 0 {
		t.Fatalf("Shape = %d tasks (%d added), %v; want %d", len(shape.Tasks), len(shape.Added), err, len(want.Tasks))
	}
	for i, o := range shape.Tasks {
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

// TestReader_AddedTasksAgreeWithStatus: a run extended by a fan-out, a review and a fix is
// read back through a Reader: every task's position, why it was added and a fixed task's
// product agree with Engine.Status, through Task (one task) and Shape (the whole run).
func TestReader_AddedTasksAgreeWithStatus(t *testing.T) {
	list := items(t, `[{"id": "pkg-1"}, {"id": "pkg-2"}]`)
	rejected := map[string]orch.Review{"t.review-r2": {Approve: false, Reasons: []string{"no test <b>"}}}
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		o := reviewer(rejected)(a)
		if a.TaskID == "split" {
			o.Items = map[string]orch.ItemList{"items.json": list}
		}
		return o
	})
	h := start(t, "", exec)
	id := h.runToEnd(parsePlan(t, `version: 1
name: ext
concurrency: 8
tasks:
  - {id: split, subagent: splitter}
  - id: each
    fan_out: {from: split, select: "output:items.json", template: {subagent: worker}}
  - id: t
    subagent: coder
    review: {subagents: [r1, r2], approve: 2}
    on_fail: {fix: {subagent: fixer, max_attempts: 2}}
`))
	want := h.wait(id)
	if want.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s: %v", want.State, taskStates(want))
	}
	ro, err := store.OpenReadOnly(context.Background(), h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r := orch.NewReader(ro.SQL())
	ctx := context.Background()
	shape, err := r.Shape(ctx, id)
	if err != nil || len(shape.Tasks) != len(want.Tasks) {
		t.Fatalf("Shape = %d tasks, %v; want %d", len(shape.Tasks), err, len(want.Tasks))
	}
	planTasks := len(shape.Tasks) - len(shape.Added)
	var added, products int
	for i, w := range want.Tasks {
		got, err := r.Task(ctx, id, w.ID)
		if err != nil || got.Index != i {
			t.Fatalf("Task(%s) = %+v, %v; want position %d", w.ID, got, err, i)
		}
		if !cmp.Equal(got.Added, w.Added) || got.Product != w.Product || !cmp.Equal(got.Review, w.Review) {
			t.Errorf("Task(%s): added %+v, product %q, review %+v; Status says %+v, %q, %+v", w.ID, got.Added, got.Product, got.Review, w.Added, w.Product, w.Review)
		}
		var fromShape *api.Added
		if i >= planTasks {
			fromShape = &shape.Added[i-planTasks]
		}
		if shape.Tasks[i].ID != w.ID || !cmp.Equal(fromShape, w.Added) {
			t.Errorf("Shape task %d = %s added %+v; Status says %s added %+v", i, shape.Tasks[i].ID, fromShape, w.ID, w.Added)
		}
		if w.Added != nil {
			added++
		}
		if w.Product != "" {
			products++
		}
	}
	// Two items, two reviewers of t, its fix and the fix's two reviewers; t's product is the fix's.
	if added != 7 || products != 1 {
		t.Errorf("%d added tasks and %d products; want 7 and 1 (tasks %v)", added, products, taskStates(want))
	}
}
