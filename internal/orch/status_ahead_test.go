package orch_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestStatus_SpecsAheadOfTheSnapshot: the engine holds an extension's tasks (a fan-out's
// items, a review, a fix) in memory before the commit that writes their rows; a read in
// between reads a snapshot without them. It shows the run as its snapshot has it: every task
// it lists has a state, its total is the tasks it lists, and its counts add up to that total.
func TestStatus_SpecsAheadOfTheSnapshot(t *testing.T) {
	release := make(chan struct{})
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "b" {
			<-release
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, filepath.Join(t.TempDir(), "orch.db"), exec)
	defer close(release) // before the engine's stop
	id := h.submit(mkPlan(t, "ahead", 2, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}}))
	h.waitTask(id, "b", lifecycle.TaskRunning)
	orch.StoreSpecAhead(h.eng, id, "review-of-a")

	ctx := context.Background()
	check := func(how string, r api.Run, tasks []api.Task) {
		t.Helper()
		counted := 0
		for _, n := range r.Counts {
			counted += n
		}
		if r.Total != 2 || len(tasks) != 2 || counted != 2 {
			t.Errorf("%s: total %d, %d tasks, counts %v; want the snapshot's 2 tasks", how, r.Total, len(tasks), r.Counts)
		}
		for _, x := range tasks {
			if x.State == "" {
				t.Errorf("%s: task %s has no state", how, x.ID)
			}
		}
	}
	r, err := h.eng.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	check("Status", r, r.Tasks)
	var each []api.Task
	r, err = h.eng.StatusEach(ctx, id, func(_ *api.Run, x *api.Task) error {
		each = append(each, *x)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("StatusEach", r, each)
	if r, err = h.eng.Summary(ctx, id); err != nil {
		t.Fatal(err)
	}
	check("Summary", r, []api.Task{{State: "-"}, {State: "-"}})
}
