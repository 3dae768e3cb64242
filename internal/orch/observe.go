package orch

import (
	"time"

	"github.com/agora-dev/agora/internal/audit"
)

// Observer sees what the engine does, for metrics, logs and traces (package obs implements
// it; the engine links neither Prometheus nor OpenTelemetry). Every method runs on the
// engine's goroutine between batches: it must return at once and must not call the engine.
// A nil Observer in [Options] costs nothing.
type Observer interface {
	// Committed reports one durable batch: its audit entries in order (every transition,
	// retry and seal, with the details they were recorded with), when the engine took its
	// first event, and how long the commit took.
	Committed(b Batch)
	// LockWait reports that a ready task waits for a lock another task holds.
	LockWait(runID, runName, taskID, lock string)
	// Reattached reports a running attempt found at start that the engine re-attaches to.
	Reattached(a Attempt)
}

// Batch is one committed batch as an [Observer] sees it. Entries must not be changed, nor
// kept past the call: the engine reuses the list for its next batch.
type Batch struct {
	Entries []audit.Entry
	Began   time.Time     // when the first event of the batch was taken
	Commit  time.Duration // the transaction alone
}

// observeLockWait tells the observer t waits for l.
func (e *Engine) observeLockWait(t *task, l *lockState) {
	if o := e.opts.Observer; o != nil {
		o.LockWait(t.run.id, t.run.name, t.spec.ID, l.name)
	}
}
