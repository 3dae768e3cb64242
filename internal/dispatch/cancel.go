package dispatch

import (
	"context"
	"fmt"
	"time"
)

// cancelWait bounds how long Cancel waits for the supervisor to record the end.
const cancelWait = 15 * time.Second

// Cancel stops a live dispatch and everything it started, and returns the final record. It is
// idempotent: cancelling a finished dispatch returns its record unchanged. It works from any
// process: it raises the record's cancel flag, kills the sandbox through the provider, waits
// for the supervising process to record the end, and records it itself when that process is
// gone.
func (d *Dispatcher) Cancel(ctx context.Context, id string) (*Record, error) {
	r, err := d.Records.RequestCancel(ctx, id)
	if err != nil {
		return nil, err
	}
	if IsTerminal(r.State) {
		return r, nil
	}
	if r.ProviderTaskID != "" {
		if err := d.Provider.Cancel(ctx, r.ProviderTaskID); err != nil {
			return nil, fmt.Errorf("cancel dispatch %s: %w", id, err)
		}
	}
	deadline := time.Now().Add(cancelWait)
	for {
		cur, err := d.Records.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if IsTerminal(cur.State) {
			return cur, nil
		}
		if !supervisorAlive(cur.supervisor) || time.Now().After(deadline) {
			if !supervisorAlive(cur.supervisor) {
				releaseStage(d.StateDir, id)
			}
			if _, err := d.Records.Finish(ctx, id, Outcome{State: StateCancelled, Reason: ReasonCancelled,
				Detail: "cancelled; no live supervisor recorded the end"}); err != nil {
				return nil, err
			}
			return d.Records.Get(ctx, id)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Reap ends every live dispatch whose supervising process is gone: its worker died with it
// (bubblewrap runs with --die-with-parent), so the record must not stay live, and its disk
// quota is unmounted and its stage's work removed (the logs stay). It returns how
// many it ended. Commands that read records call it first, so a crash is repaired the next
// time anyone looks.
func (d *Dispatcher) Reap(ctx context.Context) (int, error) {
	live, err := d.Records.live(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range live {
		if supervisorAlive(r.supervisor) {
			continue
		}
		o := Outcome{State: StateFailed, Reason: ReasonLost,
			Detail: fmt.Sprintf("the process supervising this dispatch (%s) exited before it ended; the worker died with it", r.supervisor)}
		if r.cancelRequested {
			o = Outcome{State: StateCancelled, Reason: ReasonCancelled, Detail: "cancelled"}
		}
		if r.ProviderTaskID != "" {
			d.Provider.Cancel(ctx, r.ProviderTaskID)
		}
		// The dead supervisor never unmounted the disk quota nor removed the stage's work.
		releaseStage(d.StateDir, r.ID)
		applied, err := d.Records.Finish(ctx, r.ID, o)
		if err != nil {
			return n, err
		}
		if applied {
			n++
		}
	}
	return n, nil
}
