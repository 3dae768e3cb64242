package dispatchcmd

import (
	"context"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Polling bounds of `dispatch describe --wait`: quick at first, then at most waitPollMax apart.
// Each poll is one read of the record; nothing is held between polls.
const (
	waitPollMin = 50 * time.Millisecond
	waitPollMax = time.Second
	// waitReapEvery is how often a waiter checks that the dispatch's supervisor is alive, so a
	// dispatch whose supervisor died is seen to end (lost) rather than waited on.
	waitReapEvery = 5 * time.Second
)

// waitForChange reads r's record until its state or phase changes or it ends, wait passes, or
// ctx ends, and returns the latest record. A dispatch that ended (needs_input included) is
// returned at once.
func waitForChange(ctx context.Context, d *dispatch.Dispatcher, r *dispatch.Record, wait time.Duration) (*dispatch.Record, error) {
	if lifecycle.DispatchEnded(r.State) {
		return r, nil
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	interval, lastReap := waitPollMin, time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil, cmdutil.Interrupted("stopped waiting; nothing changed: dispatch %s is %s and runs on (follow it with 'agora dispatch describe %s --wait 10m', stop it with 'agora dispatch cancel %s')",
				r.ID, r.State, r.ID, r.ID)
		case <-deadline.C:
			return r, nil
		case <-time.After(interval):
		}
		if time.Since(lastReap) >= waitReapEvery {
			if _, err := d.Reap(ctx); err != nil {
				return nil, err
			}
			lastReap = time.Now()
		}
		cur, err := d.Records.Get(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if cur.State != r.State || cur.Phase != r.Phase || lifecycle.DispatchEnded(cur.State) {
			return cur, nil
		}
		r, interval = cur, min(2*interval, waitPollMax)
	}
}
