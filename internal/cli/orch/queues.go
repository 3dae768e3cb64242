package orch

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/orch/api"
)

// orchQueuesRun is `agora orch status` without a run: every queue, its concurrency, the
// tasks running on it and its depth.
func orchQueuesRun(ctx context.Context, f *cmdutil.Factory, output string) error {
	c, err := f.OrchClient(ctx)
	if err != nil {
		return err
	}
	qs, err := c.Queues(ctx)
	if err != nil {
		return err
	}
	if qs == nil {
		qs = []api.Queue{}
	}
	return cmdutil.Emit(f.IO, output, api.Queues{Queues: qs}, func(v api.Queues) error {
		rows := make([][]string, len(v.Queues))
		for i, q := range v.Queues {
			limit := strconv.Itoa(q.Concurrency)
			switch {
			case q.Concurrency == 0:
				limit = "unlimited"
			case !q.Declared:
				limit += " (not declared in agora.yaml)"
			}
			rows[i] = []string{q.Name, limit, strconv.Itoa(q.Running), strconv.Itoa(q.Depth), strconv.Itoa(q.Runs)}
		}
		return cmdutil.PrintTable(f.IO, []string{"QUEUE", "CONCURRENCY", "RUNNING", "DEPTH", "RUNS"}, rows)
	})
}

// queueLine describes a run's queue for its status header, "" when the status has no queue.
func queueLine(r api.Run) string {
	if r.Queue == "" {
		return ""
	}
	q := r.QueueState
	if q == nil {
		return "queue: " + r.Queue
	}
	limit := fmt.Sprintf("%d running of %d", q.Running, q.Concurrency)
	if q.Concurrency == 0 {
		limit = fmt.Sprintf("%d running", q.Running)
	}
	if !q.Declared && q.Concurrency != 0 {
		limit += " (not declared in agora.yaml: declare it to restore its concurrency)"
	}
	return fmt.Sprintf("queue: %s, %s, depth %d (ready tasks waiting to start), %d open runs", q.Name, limit, q.Depth, q.Runs)
}

// slotLine describes the schedule slot a run is for, "" for a run submitted by hand.
func slotLine(r api.Run) string {
	if r.Schedule == "" || r.Slot == nil {
		return ""
	}
	s := fmt.Sprintf("schedule: %s, slot %s", r.Schedule, r.Slot.UTC().Format(time.RFC3339))
	if r.Missed > 0 {
		s += fmt.Sprintf(", missed: %d (%s earlier had no run of its own while serve was down and %s coalesced into this one)", r.Missed, cmdutil.Plural(r.Missed, "slot"), map[bool]string{true: "was", false: "were"}[r.Missed == 1])
	}
	return s
}
