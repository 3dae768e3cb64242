package orch

import (
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// actionOutcome says what a successful cancel, answer, retry or seal did and what the run
// does next, from the run as the service returned it after the action. The run's bare state
// is not enough: right after a task is cancelled or answered the run is still "running",
// which reads as if nothing happened.
func actionOutcome(action string, req api.ActionRequest, r api.Run) string {
	var t *api.Task
	for i := range r.Tasks {
		if r.Tasks[i].ID == req.Task {
			t = &r.Tasks[i]
		}
	}
	head := fmt.Sprintf("agora: %s: ", action)
	switch {
	case action == "cancel" && req.Task == "":
		if r.State == lifecycle.RunCancelled {
			return head + fmt.Sprintf("run %s cancelled: no task of it starts again, and the run is sealed (%s tasks done)", r.ID, progress(r))
		}
		return head + fmt.Sprintf("run %s: cancel requested; its %d running tasks are being stopped, then the run ends cancelled and sealed (follow it: agora orch watch %s)",
			r.ID, r.Counts[lifecycle.TaskRunning], r.ID)
	case action == "cancel" && t != nil:
		what := fmt.Sprintf("task %s of run %s cancelled", t.ID, r.ID)
		if t.State == lifecycle.TaskRunning {
			what = fmt.Sprintf("task %s of run %s: its dispatch is being stopped, then the task ends cancelled", t.ID, r.ID)
		}
		return head + what + "; " + skippedBy(r, t.ID) + "; " + runNext(r)
	case action == "answer" && t != nil:
		return head + fmt.Sprintf("task %s of run %s answered; a new attempt starts from the same subagent with the question and the answer; %s",
			t.ID, r.ID, runNext(r))
	case action == "retry" && t != nil:
		return head + fmt.Sprintf("task %s of run %s is ready again with a fresh retry budget; %s", t.ID, r.ID, runNext(r))
	case action == "seal":
		return head + fmt.Sprintf("run %s (%s) sealed: it accepts no further change; export its bundle with agora orch audit %s", r.ID, r.State, r.ID)
	}
	return head + fmt.Sprintf("run %s is %s (%s tasks done)", r.ID, r.State, progress(r))
}

// skippedBy names the tasks skipped because task id was cancelled.
func skippedBy(r api.Run, id string) string {
	var ids []string
	for _, t := range r.Tasks {
		if t.State == lifecycle.TaskSkipped && t.Detail == "task "+id+" cancelled" {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return "no dependent was skipped"
	}
	return "skipped its dependents: " + strings.Join(ids, ", ")
}

// runNext says what the run does after an action on one of its tasks.
func runNext(r api.Run) string {
	switch r.State {
	case lifecycle.RunRunning:
		return fmt.Sprintf("the run goes on (%s tasks done; follow it: agora orch watch %s)", progress(r), r.ID)
	case lifecycle.RunNeedsInput:
		return fmt.Sprintf("the run waits for an answer to another task (%s tasks done; agora orch status %s)", progress(r), r.ID)
	}
	return fmt.Sprintf("the run ended %s (%s tasks done)", r.State, progress(r))
}
