package detach

import (
	"context"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
)

// Start hands the accepted dispatch id to a detached supervisor and waits until the dispatch
// has left accepted (its worker started, or it ended), then returns its record. It gives up
// after a minute, or when ctx ends; the supervisor keeps running either way.
func (s *Supervisors) Start(ctx context.Context, id string) (*dispatch.Record, error) {
	target := ""
	if s.Standbys != nil {
		// The standbys are per target.
		r, err := s.Records.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		target = r.Target
	}
	exited, _, err := s.spawn(target, id)
	if err != nil {
		return nil, err
	}
	within := s.startWithin
	if within <= 0 {
		within = time.Minute
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(startPoll)
	defer tick.Stop()
	late := false
	for {
		r, err := s.Records.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if r.State != dispatch.StateAccepted {
			return r, nil
		}
		if late {
			return nil, fmt.Errorf("dispatch %s did not start within a minute; see 'agora dispatch describe %s'", id, id)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			late = true // one last read: it may have started just now
		case <-exited:
			// Read at once: an exited supervisor has ended the dispatch, or handed it to
			// another (claiming is exclusive), which the record shows.
			exited = nil
		case <-tick.C:
		}
	}
}
