package orch_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestStatusEach: a run's tasks are handed over one at a time in plan order, each as Status
// shows it, whether its row is in the table or still in the row log; the run returned has
// Status's counts and next step and no tasks. An error from the func stops the read and is
// returned as it is; a nil func reads the run alone. Summary by a shared name says how many
// runs share it.
func TestStatusEach(t *testing.T) {
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "b" {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := startFolding(t, filepath.Join(t.TempDir(), "orch.db"), exec, nil) // records wait in the row log
	specs := []spec{{ID: "a"}, {ID: "b", Deps: []string{"a"}}, {ID: "c", Deps: []string{"b"}}, {ID: "d", Deps: []string{"a"}},
		{ID: "e", Deps: []string{"c", "d"}}}
	h.runToEnd(mkPlan(t, "each", 2, specs...))
	id := h.runToEnd(mkPlan(t, "each", 3, specs...)) // the name's second run (another plan)
	ctx := context.Background()
	want, err := h.eng.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if want.State != lifecycle.RunFailed || want.Counts[lifecycle.TaskSkipped] != 2 {
		t.Fatalf("run %s, %v", want.State, want.Counts)
	}
	var got []api.Task
	run, err := h.eng.StatusEach(ctx, "each", func(r *api.Run, task *api.Task) error {
		if r.ID != id || r.Total != len(specs) {
			t.Errorf("handed run %s of %d tasks", r.ID, r.Total)
		}
		got = append(got, *task)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want.Tasks) {
		t.Errorf("handed %+v\nStatus has %+v", got, want.Tasks)
	}
	if run.Tasks != nil || !reflect.DeepEqual(run.Counts, want.Counts) || run.Next != want.Next || run.NameRuns != 2 {
		t.Errorf("run returned: %d tasks, counts %v, next %q, name runs %d; Status: %v, %q", len(run.Tasks), run.Counts, run.Next,
			run.NameRuns, want.Counts, want.Next)
	}

	stop := errors.New("enough")
	calls := 0
	if _, err := h.eng.StatusEach(ctx, id, func(*api.Run, *api.Task) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	}); err != stop || calls != 3 {
		t.Errorf("stopped at the third task: %v after %d calls", err, calls)
	}
	if r, err := h.eng.StatusEach(ctx, id, nil); err != nil || !reflect.DeepEqual(r.Counts, want.Counts) {
		t.Errorf("read without tasks: %v, %v", r.Counts, err)
	}
	if _, err := h.eng.StatusEach(ctx, "nope", nil); err == nil {
		t.Error("a run that is not there was read")
	}
	sum, err := h.eng.Summary(ctx, "each")
	if err != nil || sum.ID != id || sum.NameRuns != 2 || !reflect.DeepEqual(sum.Counts, want.Counts) {
		t.Errorf("summary by name: %s, %d runs, %v, %v", sum.ID, sum.NameRuns, sum.Counts, err)
	}
}
