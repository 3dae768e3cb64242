package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// cancelWait bounds how long Cancel waits for the supervisor to record the end.
const cancelWait = 15 * time.Second

// Cancel stops a live dispatch and everything it started, and returns the final record. It is
// idempotent: cancelling a finished dispatch returns its record unchanged. It works from any
// process: it raises the record's cancel flag, kills the sandbox through the provider, waits
// for the supervising process to record the end, and records it itself when that process is
// gone (then it also releases what the dispatch held on the host) or still has not after
// cancelWait (a stuck supervisor may yet use its stage, which stays held until it ends or
// Reap finds it gone).
func (d *Dispatcher) Cancel(ctx context.Context, id string) (*Record, error) {
	if !d.leads() {
		return nil, fmt.Errorf("cancel dispatch %s: %w", id, ErrNotLeader)
	}
	r, err := d.Records.RequestCancel(ctx, id)
	if err != nil {
		return nil, err
	}
	if lifecycle.DispatchEnded(r.State) {
		return r, nil
	}
	if r.ProviderTaskID != "" {
		if err := d.cancelTask(ctx, r); err != nil {
			return nil, fmt.Errorf("cancel dispatch %s: %w", id, err)
		}
	}
	deadline := time.Now().Add(cmp.Or(d.testOnlyCancelWait, cancelWait))
	for {
		cur, err := d.Records.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if lifecycle.DispatchEnded(cur.State) {
			return cur, nil
		}
		if dead := !supervisorAlive(cur.supervisor); dead || time.Now().After(deadline) {
			// The end is recorded before the stage is released (audit before effect), and for a
			// dead supervisor only while the record still names it: one that claimed the
			// dispatch since holds its stage, and records its end itself.
			expect := ""
			if dead {
				expect = cur.supervisor
			}
			applied, _, err := d.Records.finishFrom(ctx, id, expect, Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled,
				Detail: "cancelled; no live supervisor recorded the end"})
			if err != nil {
				return nil, err
			}
			if dead && !applied {
				continue // claimed meanwhile, or ended by another: read it again
			}
			if dead {
				if err := d.revokeSession(ctx, cur); err != nil {
					d.log().Warn("cancel: the gateway session of a dispatch whose supervisor is gone could not be revoked",
						"dispatch", id, "err", err.Error())
				}
				d.release(ctx, id)
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
// (bubblewrap runs with --die-with-parent), so the record must not stay live. A started
// dispatch whose worker outlives its supervisor (a Kubernetes Job) is adopted instead when
// this process is a supervisor host (d.Adopt), or left live for one for [OrphanWait] (see
// orphanKept). It also
// releases what every dispatch whose supervisor is gone still holds on the host (task
// cgroup, disk quota, stage work, gateway directory; the logs stay), whatever its record
// says: a supervisor can die after `dispatch cancel` recorded the end for it. It returns how
// many records it ended. Commands that read records call it first, so a crash is repaired
// the next time anyone looks; it reads the live records and the held index (see heldDir),
// never every record.
func (d *Dispatcher) Reap(ctx context.Context) (int, error) {
	if !d.leads() {
		return 0, nil // the leader reaps (see leads): this process's agora.db may be stale
	}
	live, err := d.Records.live(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	seen := make(map[string]bool, len(live))
	for _, r := range live {
		seen[r.ID] = true
		if supervisorAlive(r.supervisor) {
			continue
		}
		kept, waited, _ := d.orphanKept(ctx, r)
		if kept {
			continue
		}
		o := Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonLost,
			Detail: fmt.Sprintf("the process supervising this dispatch (%s) exited before it ended; the worker died with it", r.supervisor)}
		if waited {
			o.Detail = fmt.Sprintf("the process supervising this dispatch (%s) exited before it ended, and no agora orch serve adopted its worker within %s: the worker was stopped",
				r.supervisor, OrphanWait)
		}
		if r.cancelRequested {
			o = Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled, Detail: "cancelled"}
		}
		// The end is recorded before its effect (the task stopped, the stage released): a
		// record that cannot be written leaves all as it was for the next reap. A reap that
		// dies in between leaves a terminal record whose stage is still held: the held
		// index below (this reap's or the next) stops and releases it.
		//
		// It is recorded only while the record names the dead supervisor r was listed with
		// (or this process, which took the orphan): a new supervisor may have claimed the
		// dispatch since, and Reap would then end it lost and remove the stage under it.
		// Not recorded here, the dispatch goes to the held index's pass, which
		// reads it afresh: ended meanwhile by someone else, with its supervisor gone, it is
		// released there; live, or its supervisor alive, it is left alone.
		expect := r.supervisor
		if waited {
			expect = selfSupervisor() // takeOrphan made this process its supervisor
		}
		applied, _, err := d.Records.finishFrom(ctx, r.ID, expect, o)
		if err != nil {
			return n, err
		}
		if !applied {
			delete(seen, r.ID)
			continue
		}
		n++
		// The dead supervisor never unmounted the disk quota nor removed the stage's work.
		d.stopAndRelease(ctx, r)
	}
	held, err := heldStages(d.StateDir)
	if err != nil {
		return n, err
	}
	for _, id := range held {
		if seen[id] {
			continue // live: released above if its supervisor is gone
		}
		r, err := d.Records.Get(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			// Held entries are made after the record, by its supervisor: with the record
			// gone, no process can supervise it.
			d.release(ctx, id)
			continue
		case err != nil:
			return n, err
		case !lifecycle.DispatchEnded(r.State) || supervisorAlive(r.supervisor):
			continue // live since the listing above, or a supervisor still ending it
		}
		d.stopAndRelease(ctx, r)
	}
	return n, nil
}

// sessionRevoker is a provider whose workers reach the host through a session of their own
// (the network gateway's, for kubernetes): RevokeSession ends dispatch id's.
type sessionRevoker interface {
	RevokeSession(ctx context.Context, dispatchID string) error
}

// revokeSession ends r's gateway session, if its target's provider holds one: a pod outlives
// its supervisor, and with the token it could still read the dispatch's mounts and upload
// into its stage.
func (d *Dispatcher) revokeSession(ctx context.Context, r *Record) error {
	if r.Target == "" {
		return nil
	}
	p, err := d.providerFor(ctx, r.Target)
	if err != nil {
		return err
	}
	if sr, ok := p.(sessionRevoker); ok {
		return sr.RevokeSession(ctx, r.ID)
	}
	return nil
}

// stopAndRelease has the provider remove r's task, whose supervisor is gone, then releases
// what r holds on the host. The task's gateway session is revoked first: the dispatch has
// ended, whatever the provider then manages. A container or pod outlives its supervisor: while the provider
// has not confirmed its removal, the stage stays held, and with it the uid the sandbox runs as
// (see leaseUID), so that no other dispatch shares that uid with a live sandbox and the next
// Reap tries again.
func (d *Dispatcher) stopAndRelease(ctx context.Context, r *Record) {
	// A session is exported just before the task starts; a dispatch that recorded no task
	// (its supervisor died in between, or its target is gone from agora.yaml) is released
	// whatever the revocation says.
	if err := d.revokeSession(ctx, r); err != nil && r.ProviderTaskID != "" {
		_ = stageAt(d.StateDir, r.ID).hold()
		d.log().Warn("reap: the gateway session of a dispatch whose supervisor is gone could not be revoked; "+
			"its stage stays held and the next reap retries", "dispatch", r.ID, "err", err.Error())
		return
	}
	if r.ProviderTaskID != "" {
		if err := d.cancelTask(ctx, r); err != nil {
			_ = stageAt(d.StateDir, r.ID).hold()
			d.log().Warn("reap: the sandbox of a dispatch whose supervisor is gone could not be removed; "+
				"its stage and sandbox uid stay held and the next reap retries",
				"dispatch", r.ID, "task", r.ProviderTaskID, "err", err.Error())
			return
		}
	}
	d.release(ctx, r.ID)
}

// cancelTask stops the provider task of r, through the provider of r's target.
func (d *Dispatcher) cancelTask(ctx context.Context, r *Record) error {
	p, err := d.providerFor(ctx, r.Target)
	if err != nil {
		return err
	}
	return p.Cancel(ctx, r.ProviderTaskID)
}

// releaser is a provider that can remove what the tasks of a dispatch left on the host when
// the process that started them died first (the local provider's task cgroups).
type releaser interface {
	Release(ctx context.Context, dispatchID string) error
}

// release removes what dispatch id holds on the host once no process supervises it: the
// provider's leftovers, then the stage's work, disk quota included, and its held entry. When
// the provider cannot release yet, or a process still runs as the uid the dispatch leased,
// the stage is held again (and with it the uid) so that a later Reap retries.
func (d *Dispatcher) release(ctx context.Context, id string) {
	var err error
	if p, ok := d.LocalProvider.(releaser); ok {
		err = p.Release(ctx, id)
	}
	if err == nil {
		// A supervisor killed while bwrap set the sandbox up, or before it recorded a verify
		// gate's task, left no task to cancel, and the sandbox can outlive its bwrap (for
		// good, in setup, waiting on it for its uid map); with no task cgroup to kill, only
		// its uid tells of it: it is ended, and the uid held while any process
		// still runs as it.
		if err = leasedUIDIdle(d.StateDir, id); err != nil {
			d.log().Warn("reap: a process still runs as the uid of a dispatch whose supervisor is gone; "+
				"its stage and sandbox uid stay held and the next reap retries", "dispatch", id, "err", err.Error())
		}
	}
	st := stageAt(d.StateDir, id)
	st.removeWork()
	if err != nil {
		_ = st.hold()
	}
}
