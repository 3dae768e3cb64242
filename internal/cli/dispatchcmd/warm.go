package dispatchcmd

import (
	"context"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// warmPoll is how often superviseWarm reads the record for its first warmFast (a short
// dispatch's end is seen within a few ms, before its standby has closed agora.db and exited),
// and warmPollRunning after: the standby's exit ends the wait at once either way.
const (
	warmPoll        = 5 * time.Millisecond
	warmFast        = 500 * time.Millisecond
	warmPollRunning = 100 * time.Millisecond
)

// superviseWarm is serve's resident path for a handed-off dispatch of a target with a warm
// slot ready: a standby supervisor claims it (serve's plan and MCP dispatches go
// the same way) and this follows its record, printing what the in-process path prints when
// it shows no phases: started, then the end. It reads the record every warmPoll, and at once
// when the standby says the end is committed or exits. Ctrl-C cancels it and waits for the end it
// records. The work outlives serve, as a plan's does.
func superviseWarm(ctx context.Context, f *cmdutil.Factory, d *dispatch.Dispatcher, sup *detach.Supervisors, rec *dispatch.Record) (*dispatch.Record, error) {
	exited, ended, err := sup.Hand(rec.Target, rec.ID)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(warmPoll)
	defer tick.Stop()
	slow := time.After(warmFast)
	started, gone := false, false
	cancel := func() (*dispatch.Record, error) {
		final, err := d.Cancel(context.WithoutCancel(ctx), rec.ID)
		if err != nil {
			return nil, err
		}
		if !lifecycle.DispatchEnded(final.State) {
			return final, nil
		}
		printEvent(f, final.State, final)
		return final, nil
	}
	for {
		select {
		case <-ctx.Done():
			return cancel()
		case <-ended:
			// The standby committed the end: read it now, not at the next poll, which
			// cost the one-shot 2.5 ms on average.
			ended = nil
		case <-exited:
			exited, gone = nil, true // read at once, then poll: it may have handed the dispatch on
		case <-slow:
			tick.Reset(warmPollRunning)
			continue
		case <-tick.C:
		}
		r, err := d.Records.Get(context.WithoutCancel(ctx), rec.ID)
		if err != nil {
			return nil, err
		}
		if !started && r.StartedAt != nil {
			started = true
			printEvent(f, lifecycle.DispatchStarted, r)
		}
		if !lifecycle.DispatchEnded(r.State) && gone {
			// The supervisor exited before the dispatch ended (killed with -9, the OOM
			// killer): nobody else finishes its record. Follow it as the CLI does when serve
			// dies: a started one whose supervisor is gone is reaped (failed/lost), one handed
			// on is followed, an accepted one gets a supervisor (the CLI waited
			// forever).
			if r, err = sup.Watch(ctx, r); err != nil {
				if ctx.Err() != nil {
					return cancel()
				}
				return nil, err
			}
		}
		if lifecycle.DispatchEnded(r.State) {
			printEvent(f, r.State, r)
			afterSupervisor(ctx, d, r)
			return r, nil
		}
	}
}

// supervisorGoneWithin bounds afterSupervisor's wait: a supervisor's own delivery tries three
// times, each send bounded by the courier's timeout.
const supervisorGoneWithin = time.Minute

// afterSupervisor returns, for a dispatch with a callback URL, once the supervisor that ran
// it in another process (a standby, a detached one) has exited. That supervisor delivers the
// dispatch's callbacks as it ends; the caller's delivery (deliverCallbacks) must then find
// them delivered, not send them a second time beside it (the end event reached
// the receiver twice). What the supervisor could not deliver, the caller retries, as the
// in-process path would.
func afterSupervisor(ctx context.Context, d *dispatch.Dispatcher, r *dispatch.Record) {
	if r.CallbackURL == "" {
		return
	}
	deadline := time.Now().Add(supervisorGoneWithin)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, alive, err := d.Records.Supervisor(context.WithoutCancel(ctx), r.ID); err != nil || !alive {
			return
		}
		time.Sleep(4 * warmPoll)
	}
}
