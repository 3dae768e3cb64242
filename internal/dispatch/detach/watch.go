package detach

import (
	"context"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Watch reads rec's record until it ends and returns the terminal record. An accepted dispatch
// whose supervisor is gone (or is this process, which accepted it) gets a detached supervisor;
// after [MaxSpawns] supervisors exited without starting the worker, Watch ends the dispatch
// failed/provider-failed (a retryable reason) instead of starting more. A started dispatch
// whose supervisor died without recording the end is reaped: its worker died with it
// (bubblewrap runs with --die-with-parent), so it ends failed/lost; a Kubernetes Job outlives
// it, and a supervisor host (serve) adopts it instead.
//
// Watch returns ctx's error when ctx ends first; the supervisor keeps running, and a later
// Watch of the same dispatch attaches to it.
func (s *Supervisors) Watch(ctx context.Context, rec *dispatch.Record) (*dispatch.Record, error) {
	id := rec.ID
	tick := time.NewTicker(s.poll())
	defer tick.Stop()
	var child <-chan struct{}
	spawned := 0
	self := dispatch.SelfSupervisor()
	for !lifecycle.DispatchEnded(rec.State) {
		sup, alive, err := s.Records.Supervisor(ctx, id)
		if err != nil {
			return nil, err
		}
		switch {
		case rec.State == lifecycle.DispatchAccepted && child == nil && (!alive || sup == self):
			if spawned == MaxSpawns {
				if err := s.giveUp(ctx, id, spawned); err != nil {
					return nil, err
				}
				break
			}
			spawned++
			if child, _, err = s.spawn(rec.Target, id); err != nil {
				return nil, fmt.Errorf("start supervisor of dispatch %s: %w", id, err)
			}
		case rec.State == lifecycle.DispatchStarted && !alive:
			if _, err := s.Reaper.Reap(ctx); err != nil {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-child:
			child = nil
		case <-tick.C:
		}
		if rec, err = s.Records.Get(ctx, id); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// giveUp ends a dispatch whose supervisors keep exiting before they start the worker, so the
// caller's retry policy decides (provider-failed is retryable).
func (s *Supervisors) giveUp(ctx context.Context, id string, spawned int) error {
	_, err := s.Records.Finish(ctx, id, dispatch.Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonProviderFailed,
		Detail: fmt.Sprintf("%d supervisors exited before starting the worker", spawned)})
	return err
}
