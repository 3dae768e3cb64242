// Package dispatchexec is the orchestrator's production [orch.Executor]: each attempt is one
// dispatch, recorded in agora.db under the id the engine chose, and supervised by a detached
// `agora dispatch supervise` process.
//
// Local workers outlive `agora orch serve`: their supervisors run in their own sessions, so
// a crash or restart of serve does not kill them. A restarted serve re-attaches by dispatch
// id: a dispatch that was never recorded is accepted now (the id makes it exactly one), an
// accepted one whose supervisor is gone gets a new supervisor (claiming is exclusive, so an
// orphaned one and the new one never both run it), a started one is watched until its record
// ends, and one whose supervisor died with its worker is reaped as failed/lost, which the
// task's retry policy may retry.
//
// It runs on the host side, inside serve.
package dispatchexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/toolreg"
)

// DefaultPoll is how often a watched dispatch's record is read.
const DefaultPoll = 250 * time.Millisecond

// maxSpawns bounds how often one attempt's supervisor is started.
const maxSpawns = 3

// SpawnFunc starts a detached supervisor of dispatch id and returns its process.
type SpawnFunc func(id string) (*exec.Cmd, error)

// Executor runs attempts as dispatches.
type Executor struct {
	D     *dispatch.Dispatcher
	Spawn SpawnFunc
	Poll  time.Duration
	Log   *slog.Logger
}

func (x *Executor) poll() time.Duration {
	if x.Poll > 0 {
		return x.Poll
	}
	return DefaultPoll
}

func (x *Executor) log() *slog.Logger {
	if x.Log != nil {
		return x.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Start implements [orch.Executor].
func (x *Executor) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	go func() {
		o, err := x.run(ctx, a)
		if err != nil {
			if ctx.Err() != nil {
				return // serve is stopping; the next serve re-attaches
			}
			o = orch.Outcome{State: api.TaskFailed, Reason: dispatch.ReasonProviderFailed, Detail: err.Error()}
		}
		o.DispatchID = a.DispatchID
		done(o)
	}()
}

// Cancel implements [orch.Executor].
func (x *Executor) Cancel(ctx context.Context, id string) {
	go func() {
		if _, err := x.D.Cancel(ctx, id); err != nil && !errors.Is(err, dispatch.ErrNotFound) {
			x.log().Warn("cancel dispatch", "dispatch", id, "err", err)
		}
	}()
}

// run brings the attempt's dispatch to its end and returns the outcome.
func (x *Executor) run(ctx context.Context, a orch.Attempt) (orch.Outcome, error) {
	rec, err := x.D.Records.Get(ctx, a.DispatchID)
	if errors.Is(err, dispatch.ErrNotFound) {
		rec, err = x.accept(ctx, a)
		var reqErr *dispatch.RequestError
		if errors.As(err, &reqErr) {
			// The catalog or the target refuses it: nothing ran, and nothing will on a retry.
			return orch.Outcome{State: api.TaskFailed, Reason: dispatch.ReasonDenied, Detail: reqErr.Error()}, nil
		}
		if errors.Is(err, dispatch.ErrExists) {
			rec, err = x.D.Records.Get(ctx, a.DispatchID)
		}
	}
	if err != nil {
		return orch.Outcome{}, err
	}
	return x.watch(ctx, rec)
}

// supervise starts a supervisor of id and returns a channel closed when it exits.
func (x *Executor) supervise(id string) (<-chan struct{}, error) {
	cmd, err := x.Spawn(id)
	if err != nil {
		return nil, fmt.Errorf("start supervisor of dispatch %s: %w", id, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	return exited, nil
}

// ownsRecord reports whether this process accepted rec (and so must start its supervisor).
func (x *Executor) ownsRecord(rec *dispatch.Record) bool {
	sup, alive, err := x.D.Records.Supervisor(context.Background(), rec.ID)
	return err == nil && alive && sup == dispatch.SelfSupervisor()
}

// accept records the attempt's dispatch under its id.
func (x *Executor) accept(ctx context.Context, a orch.Attempt) (*dispatch.Record, error) {
	req := dispatch.Request{
		ID: a.DispatchID, Subagent: a.Subagent, Envs: a.Env, Target: a.Target, Input: a.Input,
		Repo: a.Repo, Revision: a.Revision, Timeout: a.Timeout, Actor: a.Actor,
	}
	if a.ParentID != "" {
		parent, err := x.D.Records.Get(ctx, a.ParentID)
		if err != nil {
			return nil, err
		}
		resumed, err := x.D.ResumeRequest(parent, a.Answer, a.Actor)
		if err != nil {
			return nil, &dispatch.RequestError{Err: err}
		}
		resumed.ID, resumed.Timeout = a.DispatchID, a.Timeout
		req = resumed
	}
	if g := a.Grants; g != nil {
		// A task narrows its subagent's grant; the dispatcher refuses a widening as denied.
		req.Grants = &toolreg.Grants{Tools: g.Tools, Commands: g.Commands, Egress: g.Egress}
	}
	for _, in := range a.Inputs {
		req.Inputs = append(req.Inputs, dispatch.InputSpec{Key: in.Key, Select: in.Select, FromDispatch: in.FromDispatch})
	}
	return x.D.Accept(ctx, req)
}

// watch reads the record until it ends. An accepted dispatch whose supervisor is gone (or is
// this process, which accepted it) gets a supervisor; a started one whose supervisor died
// without recording the end is reaped (its worker died with it: --die-with-parent).
func (x *Executor) watch(ctx context.Context, rec *dispatch.Record) (orch.Outcome, error) {
	id := rec.ID
	t := time.NewTicker(x.poll())
	defer t.Stop()
	var child <-chan struct{}
	spawned := 0
	self := dispatch.SelfSupervisor()
	for {
		if dispatch.IsTerminal(rec.State) {
			return outcome(rec), nil
		}
		sup, alive, err := x.D.Records.Supervisor(ctx, id)
		if err != nil {
			return orch.Outcome{}, err
		}
		switch {
		case rec.State == dispatch.StateAccepted && child == nil && (!alive || sup == self):
			if spawned == maxSpawns {
				// Supervisors keep exiting before they start the worker: end it, so the
				// task's retry policy decides (provider-failed is retryable).
				if _, err := x.D.Records.Finish(ctx, id, dispatch.Outcome{State: dispatch.StateFailed, Reason: dispatch.ReasonProviderFailed,
					Detail: fmt.Sprintf("%d supervisors exited before starting the worker", spawned)}); err != nil {
					return orch.Outcome{}, err
				}
				break
			}
			spawned++
			if child, err = x.supervise(id); err != nil {
				return orch.Outcome{}, err
			}
		case rec.State == dispatch.StateStarted && !alive:
			if _, err := x.D.Reap(ctx); err != nil {
				return orch.Outcome{}, err
			}
		}
		select {
		case <-ctx.Done():
			return orch.Outcome{}, ctx.Err()
		case <-child:
			child = nil
		case <-t.C:
		}
		if rec, err = x.D.Records.Get(ctx, id); err != nil {
			return orch.Outcome{}, err
		}
	}
}

// outcome maps a terminal dispatch record to an attempt outcome.
func outcome(r *dispatch.Record) orch.Outcome {
	o := orch.Outcome{DispatchID: r.ID, Reason: r.Reason, Detail: r.Detail}
	switch r.State {
	case dispatch.StateFinished:
		o.State = api.TaskSucceeded
	case dispatch.StateNeedsInput:
		o.State = api.TaskNeedsInput
		if r.Result != nil && r.Result.NeedsInput != nil {
			o.Question = r.Result.NeedsInput.Question
		}
	case dispatch.StateCancelled:
		o.State = api.TaskCancelled
	default:
		o.State = api.TaskFailed
	}
	return o
}
