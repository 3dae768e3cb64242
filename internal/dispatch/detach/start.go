package detach

import (
	"context"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Start hands the accepted dispatch id to a detached supervisor and waits until the dispatch
// has left accepted (its worker started, or it ended), then returns its record. It gives up
// after a minute, or when ctx ends; the supervisor keeps running either way.
func (s *Supervisors) Start(ctx context.Context, id string) (*dispatch.Record, error) {
	r, _, err := s.Launch(ctx, id)
	return r, err
}

// Launch is [Supervisors.Start] that also returns done, closed as soon as the dispatch's
// supervisor says its end is committed (a standby's word) or exits (any supervisor: the
// dispatch ended, or was handed on), so a caller that follows the record reads it then rather
// than at its next poll (an MCP agora_dispatch of a no-op answered at the first 50 ms
// poll after its end).
func (s *Supervisors) Launch(ctx context.Context, id string) (*dispatch.Record, <-chan struct{}, error) {
	target := ""
	if s.Standbys != nil {
		// The standbys are per target.
		r, err := s.Records.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		target = r.Target
	}
	exited, ended, err := s.spawn(target, id)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ended:
		case <-exited:
		}
		close(done)
	}()
	within := s.startWithin
	if within <= 0 {
		within = time.Minute
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	// Quick at first: a warm standby starts the worker within a few ms, and a no-op ends as
	// soon; done cuts the wait for an end short.
	tick := time.NewTicker(startPollFast)
	defer tick.Stop()
	slow := time.After(startFast)
	late := false
	wake := (<-chan struct{})(done)
	for {
		r, err := s.Records.Get(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if r.State != lifecycle.DispatchAccepted {
			return r, done, nil
		}
		if late {
			return nil, nil, fmt.Errorf("dispatch %s did not start within a minute; see 'agora dispatch describe %s'", id, id)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-deadline.C:
			late = true // one last read: it may have started just now
		case <-wake:
			// Read at once: the supervisor has ended the dispatch, or exited having handed
			// it to another (claiming is exclusive), which the record shows.
			wake = nil
		case <-slow:
			tick.Reset(startPoll)
		case <-tick.C:
		}
	}
}
