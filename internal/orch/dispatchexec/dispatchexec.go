// Package dispatchexec is the orchestrator's production [orch.Executor]: each attempt is one
// dispatch, recorded in agora.db under the id the engine chose, and supervised by a detached
// `agora dispatch supervise` process (package [detach]).
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
	"log/slog"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// Executor runs attempts as dispatches.
type Executor struct {
	D *dispatch.Dispatcher
	// Supervisors starts and follows the dispatches' detached supervisors.
	Supervisors *detach.Supervisors
	Log         *slog.Logger
	// Trace, when set, returns the traceparent of the task span an attempt (by dispatch id)
	// runs under: its dispatch's span becomes a child of it.
	Trace func(dispatchID string) string
	// Replicated, when set (a home that replicates, replicate.s3), returns once agora.db's
	// replica holds every commit made before since. An attempt's end reaches the engine, and
	// so orch.db, only after that: orch.db and agora.db are shipped on their own ticks, and a
	// home restored from the bucket that held a task's end (and its dependants fired) without
	// its dispatch's end would refuse the dependants' inputs ("only a finished dispatch has
	// products") and fail the run a leader's death interrupted. Each attempt waits on its own
	// goroutine: ends are later by about half a replicate.lag, never serialised.
	Replicated func(ctx context.Context, since time.Time) error
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
			o = orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonProviderFailed, Detail: err.Error()}
		}
		if x.Replicated != nil {
			if werr := x.Replicated(ctx, time.Now()); werr != nil {
				if ctx.Err() != nil {
					return // serve is stopping; the next serve re-attaches
				}
				// The bucket is behind (or down): the end is reported anyway, so a run goes on;
				// only a takeover during the outage could restore the end without the dispatch's.
				x.log().Warn("a task's end reaches orch.db before its dispatch's end is in agora.db's replica", "dispatch", a.DispatchID, "err", werr.Error())
			}
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
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonDenied, Detail: reqErr.Error()}, nil
		}
		if errors.Is(err, dispatch.ErrExists) {
			rec, err = x.D.Records.Get(ctx, a.DispatchID)
		}
	}
	if err != nil {
		return orch.Outcome{}, err
	}
	if rec, err = x.Supervisors.Watch(ctx, rec); err != nil {
		return orch.Outcome{}, err
	}
	o := outcome(rec)
	if o.State == lifecycle.TaskSucceeded {
		// A learn dispatch's products were made under a grant nobody enforced: its list
		// expands no fan-out and its review judges nothing (docs/learn.md).
		refused := dispatch.ProductRefusal(rec, "a fan-out or a review")
		if len(a.Lists) > 0 {
			if refused != nil {
				o.Items = make(map[string]orch.ItemList, len(a.Lists))
				for _, p := range a.Lists {
					o.Items[p] = orch.ItemList{Err: refused.Error()}
				}
			} else {
				o.Items = x.readLists(rec, a.Lists)
			}
		}
		if a.Review {
			var v orch.Review
			if refused != nil {
				v = orch.InvalidReview(refused.Error())
			} else {
				v = x.readReview(rec)
			}
			o.Review = &v
		}
	}
	return o, nil
}

// accept records the attempt's dispatch under its id.
func (x *Executor) accept(ctx context.Context, a orch.Attempt) (*dispatch.Record, error) {
	req := dispatch.Request{
		ID: a.DispatchID, Subagent: a.Subagent, Envs: a.Env, Target: a.Target, Input: a.Input,
		Repo: a.Repo, Revision: a.Revision, Timeout: a.Timeout, Actor: a.Actor,
		RunID: a.RunID, TaskID: a.TaskID, Verify: a.Verify, Learn: a.Learn,
	}
	if a.Workspace != "" {
		// The pinned workspace version and commit; the dispatcher resolves its repository.
		req.Workspace, req.Repo = a.Workspace, ""
	}
	if a.ParentID != "" {
		parent, err := x.D.Records.Get(ctx, a.ParentID)
		if err != nil {
			return nil, err
		}
		// The run answers its own attempt; the dispatcher records the answer on the parent
		// with the attempt, and refuses a parent answered otherwise.
		resumed, err := x.D.ResumeRequest(ctx, parent, a.Answer, dispatch.Answerer{
			Actor: a.Actor, Via: dispatch.ViaOrch, RunID: a.RunID, TaskID: a.TaskID})
		if err != nil {
			return nil, &dispatch.RequestError{Err: err}
		}
		resumed.ID, resumed.Timeout, resumed.Verify = a.DispatchID, a.Timeout, a.Verify
		resumed.Learn = resumed.Learn || a.Learn
		req = resumed
	}
	if g := a.Grants; g != nil {
		// A task narrows its subagent's grant; the dispatcher refuses a widening as denied.
		narrowed := g.Clone()
		req.Grants = &narrowed
	}
	// The task's narrowing and what is left of the run's budget; the dispatcher refuses a
	// task budget above the subagent's or the target's as denied.
	req.Budget, req.Ceilings = a.Budget, append(req.Ceilings, a.Ceilings...)
	for _, in := range a.Inputs {
		req.Inputs = append(req.Inputs, dispatch.InputSpec{Key: in.Key, Select: in.Select, FromDispatch: in.FromDispatch, Dir: in.Dir, Apply: in.Apply, Stack: in.Stack})
	}
	if x.Trace != nil {
		req.Traceparent = x.Trace(a.DispatchID)
	}
	// A run an MCP client submitted (its actor is "mcp:" + the client, set by the MCP
	// server, never by the client) may not start a learn dispatch: a task on a target in
	// mode: learn is refused (docs/learn.md).
	req.NoLearn = strings.HasPrefix(a.Actor, api.MCPActorPrefix)
	return x.D.Accept(ctx, req)
}

// outcome maps a terminal dispatch record to an attempt outcome.
func outcome(r *dispatch.Record) orch.Outcome {
	o := orch.Outcome{DispatchID: r.ID, Reason: r.Reason, Detail: r.Detail, Usage: r.Usage, Verdict: r.Verdict}
	switch r.State {
	case lifecycle.DispatchFinished:
		o.State = lifecycle.TaskSucceeded
	case lifecycle.DispatchNeedsInput, lifecycle.DispatchAnswered:
		// An answered dispatch ended needs_input; its answer is another attempt.
		o.State = lifecycle.TaskNeedsInput
		if r.Result != nil && r.Result.NeedsInput != nil {
			o.Question = r.Result.NeedsInput.Question
		}
	case lifecycle.DispatchCancelled:
		o.State = lifecycle.TaskCancelled
	default:
		o.State = lifecycle.TaskFailed
	}
	return o
}
