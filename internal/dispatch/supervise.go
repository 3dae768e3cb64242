package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// supervising holds the dispatches a Supervise of this process runs, by state directory and id.
var supervising sync.Map

// Progress receives lifecycle events as they are recorded (kind is a state), and each
// host-side phase as it begins (kind is a Phase constant, r the record as accepted).
type Progress func(kind string, r *Record)

// Supervise runs an accepted dispatch to its terminal state: it stages the bundle, starts the
// worker, records started, waits, and reconciles. It returns the final record. Whatever goes
// wrong after the record exists ends in a recorded terminal state, never in a silent return.
func (d *Dispatcher) Supervise(ctx context.Context, id string, progress Progress) (*Record, error) {
	r, err := d.Records.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return d.supervise(ctx, r, progress)
}

// SuperviseAccepted is Supervise of r, the record this process's Accept has just returned:
// it starts from r instead of reading the record again. Whatever changes the record in
// between (a cancel) is found as Supervise finds what changes it after its read.
func (d *Dispatcher) SuperviseAccepted(ctx context.Context, r *Record, progress Progress) (*Record, error) {
	return d.supervise(ctx, r, progress)
}

func (d *Dispatcher) supervise(ctx context.Context, r *Record, progress Progress) (*Record, error) {
	if progress == nil {
		progress = func(string, *Record) {}
	}
	id := r.ID
	if r.State != lifecycle.DispatchAccepted {
		return r, nil
	}
	// Two goroutines of one process are not told apart by Claim (nor by started, which a
	// second would reach only after staging over the first's stage and failing the dispatch):
	// the first to get here runs it, a second reports the record as it is.
	key := d.StateDir + "\x00" + id
	if _, busy := supervising.LoadOrStore(key, struct{}{}); busy {
		return d.Records.Get(ctx, id)
	}
	defer supervising.Delete(key)
	// A dispatch accepted by this very process (the CLI's run, a server's) is claimed
	// already: Claim would only write back the supervisor it holds (one transaction
	// fewer).
	if r.supervisor != selfSupervisor() {
		if err := d.Records.Claim(ctx, id); err != nil {
			if errors.Is(err, ErrClaimed) {
				// Someone else runs it (or it already started): report the record as it is.
				return d.Records.Get(ctx, id)
			}
			return nil, err
		}
	}
	sp := d.startDispatchSpan(ctx, r)
	s := &supervision{d: d, r: r, progress: progress, sp: sp}
	// After the end is recorded and reported (see run): a holder waiting on the record, and
	// the CLI behind it, need not wait for the unmounts.
	defer d.tearDown(s)
	outcome, err := s.run(ctx)
	if ferr := store.CheckFence(); ferr != nil && s.handle != nil {
		// The leader that started this supervisor lost its lease (a fenced child,
		// fencefile): the dispatch may be adopted by the new leader already, so its end is
		// not this process's to take. It records nothing (the fence would refuse it). A
		// task elsewhere (a Job, a container on an engine the new leader reaches) is left
		// with its Secret and policy, the stage and the uid lease as a supervisor killed here
		// would leave them: for the new leader's adoption or reap. A local sandbox is this
		// host's alone and cannot be adopted by a leader elsewhere, and its stage and uid
		// lease are this home's, which the new leader (another home, restored from the
		// replica) never reaps: those are released as usual, or they would stay mounted on
		// this host for good.
		s.abandoned = s.target.Provider != config.ProviderLocal
		// A detached supervisor's stderr (slog's default) is the home's supervisors' log
		// (detach.LogFile), where an operator finds why the dispatch stayed live; the
		// fence's error names its file and why, no secret.
		d.log().Warn("dispatch: the leader fence is closed; leaving the dispatch's end to the leader that holds the lease",
			"dispatch", id, "fence", ferr.Error())
		return nil, fmt.Errorf("dispatch %s: %w", id, ferr)
	}
	if err != nil {
		outcome = Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonProviderFailed, Detail: err.Error()}
	}
	// Record the end even when ctx was cancelled: the record must not stay live.
	_, final, err := d.Records.finish(context.WithoutCancel(ctx), id, outcome)
	if err != nil {
		return nil, err
	}
	sp.finish(final)
	progress(final.State, final)
	return final, nil
}

func failed(reason, format string, args ...any) Outcome {
	return Outcome{State: lifecycle.DispatchFailed, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// budgets splits a dispatch's wall clock into the setup scripts' budget and the agent's, in
// whole seconds, leaving the worker a margin to capture the patch. The worker kills the agent
// at its budget; the provider's wall clock at the full timeout is the backstop.
func budgets(timeout time.Duration) (setup, agent int) {
	margin := min(wire.CaptureMargin, timeout/5)
	setupD := min(2*time.Minute, timeout/4)
	setup = max(1, int(setupD.Seconds()))
	agent = max(1, int((timeout - setupD - margin).Seconds()))
	return setup, agent
}

// watchCancel polls the record's cancel flag (set by `agora dispatch cancel` in another
// process) and kills the sandbox when it is raised, or when limit fires. Polling keeps the
// contract simple: the flag lives in the database every process can reach.
func (d *Dispatcher) watchCancel(ctx context.Context, provider compute.Provider, id string, h compute.Handle, limit <-chan struct{}) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				cancelUnfenced(context.WithoutCancel(ctx), provider, h)
				return
			case <-limit:
				cancelUnfenced(context.WithoutCancel(ctx), provider, h)
				return
			case <-t.C:
				if d.Records.cancelRequested(ctx, id) {
					cancelUnfenced(ctx, provider, h)
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// cancelUnfenced stops h's task unless this process's fence is closed: a supervisor whose
// leader lost the lease must not stop a task the new leader may have adopted.
func cancelUnfenced(ctx context.Context, provider compute.Provider, h compute.Handle) {
	if store.CheckFence() != nil {
		return
	}
	provider.Cancel(ctx, h.TaskID())
}
