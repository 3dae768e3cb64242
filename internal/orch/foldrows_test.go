package orch_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// TestFold_RowsBounded: a skip cascade writes records of up to 2,048 rows each, far fewer
// records than foldBound. Past foldRows rows every commit folds the oldest records, so what
// waits in the row log (what every reader's overlay is made of) stays near the bound, not
// at the run's size; the run still ends with every task counted, before and after a reopen.
func TestFold_RowsBounded(t *testing.T) {
	const bound = 500
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "l0-0" {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	path := filepath.Join(t.TempDir(), "orch.db")
	logged := &logRows{t: t}
	h := startRowBounded(t, path, exec, bound, logged)
	logged.db = h.db.SQL()

	id := h.submit(mkPlan(t, "rows", 100, layered(100, 100, 10)...))
	r := h.wait(id)
	if r.State != lifecycle.RunFailed {
		t.Fatalf("run %s", r.State)
	}
	skipped := r.Counts[lifecycle.TaskSkipped]
	if skipped < 3*orch.CascadeBatch {
		t.Fatalf("%d skipped: the plan must skip more than a few cascade batches", skipped)
	}
	// A commit below the bound may add a record of a cascade batch's skips (and their
	// attempts' ends) before the next folds.
	if n := logged.most.Load(); n > bound+2*orch.CascadeBatch {
		t.Errorf("the row log held %d rows during a cascade of %d skips; the bound is %d", n, skipped, bound)
	}
	if got := r.Counts[lifecycle.TaskSkipped] + r.Counts[lifecycle.TaskSucceeded] + r.Counts[lifecycle.TaskFailed]; got != r.Total || r.Total != 10000 {
		t.Errorf("counts %v add up to %d of %d", r.Counts, got, r.Total)
	}
	h.stop()
	h2 := startWith(t, path, exec, orch.Options{})
	if again := h2.wait(id); again.Counts[lifecycle.TaskSkipped] != skipped || again.State != lifecycle.RunFailed {
		t.Errorf("reopened: %s, %v; before: %d skipped", again.State, again.Counts, skipped)
	}
}

// logRows reads how many rows the row log holds after every fourth commit (a cascade's
// records wait for hundreds), and keeps the most.
type logRows struct {
	commitCount
	t    *testing.T
	db   *sql.DB
	most atomic.Int64
}

func (l *logRows) Committed(orch.Batch) {
	if l.n.Add(1)%4 != 0 {
		return
	}
	n, err := orch.LogRows(context.Background(), l.db)
	if err != nil {
		l.t.Error(err)
		return
	}
	if int64(n) > l.most.Load() {
		l.most.Store(int64(n))
	}
}

// startRowBounded starts an engine on path, with exec and obs (nil: none), that folds the row
// log only past rows rows waiting (or foldBound records), never when idle.
func startRowBounded(t *testing.T, path string, exec orch.Executor, rows int, obs orch.Observer) *harness {
	t.Helper()
	db := openDB(t, path)
	eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, orch.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	orch.SetFoldRows(eng, rows)
	orch.SetFoldIdle(eng, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{tb: t, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- eng.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}
