package orch_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// slowExec completes every attempt after a short wait, so a run lasts long enough for a
// reader to look at it between the engine's commits.
type slowExec struct{ wait time.Duration }

func (s slowExec) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	go func() {
		time.Sleep(s.wait)
		done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
	}()
}

func (slowExec) Cancel(context.Context, string) {}

// TestReader_RacingBatches is the attack of a reader racing the engine's batches: while a
// layered DAG runs, a reader over its own read-only connection (as the web pages, `agora orch
// status` and bundles read orch.db) looks at the run again and again. Whatever commit it
// lands between, what it sees must be one commit's state: every task of the run (they are
// inserted with it), as many orch.task.fired entries as attempt rows and as many
// orch.task.succeeded entries as succeeded attempts and succeeded tasks (a state change
// commits with its audit entry), no running task without its live attempt, no task's row
// ahead of or behind its attempt, and nothing succeeded ever going back. A row state written
// outside its audit entry's transaction, or a task row derived from a log the reader did not
// see whole, shows here.
func TestReader_RacingBatches(t *testing.T) {
	h := start(t, "", slowExec{wait: 2 * time.Millisecond})
	specs := layered(10, 12, 15)
	n := len(specs)
	ro, err := store.OpenReadOnly(context.Background(), h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r := orch.NewReader(ro.SQL())
	ctx := context.Background()

	id := h.submit(mkPlan(t, "racing", 1000, specs...))
	var (
		wg          sync.WaitGroup
		mid, reads  int
		problems    []string
		stopReading = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := 0
		for {
			select {
			case <-stopReading:
				return
			default:
			}
			succeeded, p := readerSnapshot(ctx, ro.SQL(), r, id, n)
			reads++
			problems = append(problems, p...)
			if succeeded < last {
				problems = append(problems, fmt.Sprintf("succeeded tasks went from %d back to %d", last, succeeded))
			}
			last = succeeded
			if succeeded > 0 && succeeded < n {
				mid++
			}
			if len(problems) > 0 {
				return
			}
		}
	}()
	run := h.wait(id)
	close(stopReading)
	wg.Wait()
	if run.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s", run.State)
	}
	for _, p := range problems {
		t.Error(p)
	}
	// One more look after the end: the same checks with every task succeeded.
	if succeeded, p := readerSnapshot(ctx, ro.SQL(), r, id, n); succeeded != n || len(p) > 0 {
		t.Errorf("after the run: %d of %d succeeded; %v", succeeded, n, p)
	}
	if mid == 0 {
		t.Fatalf("none of %d reads landed while the run was half done: the test raced nothing", reads)
	}
	if unfoldedReads.Load() == 0 {
		t.Fatalf("none of %d reads found a row log record unfolded: the overlay was never read", reads)
	}
	t.Logf("%d reads, %d of them mid-run", reads, mid)
}

// unfoldedReads counts the snapshots that read unfolded row log records.
var unfoldedReads atomic.Int64

// readerSnapshot reads run id through r and, in one read transaction, its rows and audit
// entries; it returns how many tasks had succeeded and what did not hold together.
func readerSnapshot(ctx context.Context, db *sql.DB, r *orch.Reader, id string, n int) (int, []string) {
	var problems []string
	counts, total, err := r.Counts(ctx, id)
	if err != nil {
		return 0, []string{fmt.Sprintf("Counts: %v", err)}
	}
	sum := 0
	for _, c := range counts {
		sum += c
	}
	if total != n || sum != n {
		problems = append(problems, fmt.Sprintf("Counts: total %d, sum %d, want %d (%v)", total, sum, n, counts))
	}
	rows, err := r.Tasks(ctx, id, 0, n)
	if err != nil {
		return 0, append(problems, fmt.Sprintf("Tasks: %v", err))
	}
	for _, row := range rows {
		switch row.State {
		case lifecycle.TaskSucceeded, lifecycle.TaskRunning:
			if row.DispatchID == "" || row.Attempts != 1 {
				problems = append(problems, fmt.Sprintf("task %s %s with dispatch %q and %d attempts", row.ID, row.State, row.DispatchID, row.Attempts))
			}
		default:
			if row.DispatchID != "" || row.Attempts != 0 {
				problems = append(problems, fmt.Sprintf("task %s %s with dispatch %q and %d attempts", row.ID, row.State, row.DispatchID, row.Attempts))
			}
		}
	}
	// The rows and entries in one read transaction, the row log's unfolded records applied
	// as every reader applies them (overlay.go).
	lo, hi := entry.Task(id, ""), entry.Task(id, "")+"\xff"
	s, err := orch.Snapshot(ctx, db, id, entry.TaskFired, entry.TaskSucceeded, lo, hi)
	if err != nil {
		return 0, append(problems, err.Error())
	}
	if s.Unfolded > 0 {
		unfoldedReads.Add(1)
	}
	doneAttempts, doneTasks, orphans, behind := 0, 0, 0, 0
	for _, a := range s.Attempts {
		if a.State == lifecycle.TaskSucceeded {
			doneAttempts++
		}
	}
	for _, t := range s.Tasks {
		a, ok := s.Attempts[t.DispatchID]
		if t.State == lifecycle.TaskSucceeded {
			doneTasks++
		}
		if t.State == lifecycle.TaskRunning && (!ok || a.State != "live") {
			orphans++
		}
		if ok && (t.State == lifecycle.TaskSucceeded) != (a.State == lifecycle.TaskSucceeded) {
			behind++
		}
	}
	if s.Fired != len(s.Attempts) || s.Done != doneAttempts || doneAttempts != doneTasks || orphans != 0 || behind != 0 {
		problems = append(problems, fmt.Sprintf("one snapshot: %d fired entries, %d attempts; %d succeeded entries, %d succeeded attempts, %d succeeded tasks; %d running tasks without a live attempt; %d tasks whose state disagrees with their attempt's",
			s.Fired, len(s.Attempts), s.Done, doneAttempts, doneTasks, orphans, behind))
	}
	return doneTasks, problems
}
