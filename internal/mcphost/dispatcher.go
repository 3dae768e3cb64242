package mcphost

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// Dispatcher is the MCP server's dispatch port: Accept as 'agora dispatch run' does, then
// hand the dispatch to a detached supervisor so it outlives the MCP session.
type Dispatcher struct {
	d *dispatch.Dispatcher
	// sup starts the detached supervisors and reaps, at most once per detach.ReapEvery,
	// the dispatches whose supervisor died.
	sup   *detach.Supervisors
	ended endedRecords
	ends  endSignals
}

var _ mcpserver.Dispatcher = (*Dispatcher)(nil)

// NewDispatcher returns the port over d, starting supervisors with sup.
func NewDispatcher(d *dispatch.Dispatcher, sup *detach.Supervisors) *Dispatcher {
	return &Dispatcher{d: d, sup: sup}
}

func (m *Dispatcher) Dispatch(ctx context.Context, req mcpserver.DispatchRequest) (*mcpserver.Record, error) {
	if err := m.sup.Reap(ctx); err != nil {
		return nil, err
	}
	return m.accept(ctx, dispatch.Request{
		Subagent: req.Subagent, Envs: req.Envs, Target: req.Target, Input: req.Input,
		Timeout: req.Timeout, Actor: req.Actor, Workspace: req.Workspace, Revision: req.Revision,
		// Learn is a person's decision: an MCP client is refused a target in mode: learn.
		NoLearn: true,
		// A version people superseded or retired starts nothing for an MCP client.
		CurrentCatalog: true,
	})
}

// accept records req's dispatch and, unless it ended already, starts its supervisor.
func (m *Dispatcher) accept(ctx context.Context, req dispatch.Request) (*mcpserver.Record, error) {
	rec, err := m.d.Accept(ctx, req)
	if err != nil {
		return nil, dispatchError(err)
	}
	if !lifecycle.DispatchEnded(rec.State) {
		id := rec.ID
		var done <-chan struct{}
		if rec, done, err = m.sup.Launch(ctx, id); err != nil {
			return nil, err
		}
		m.ends.track(id, done, time.Now())
	}
	return record(rec), nil
}

var _ mcpserver.PinGate = (*Dispatcher)(nil)

// NotCurrent refuses ref, a pinned version, when people superseded it or retired its name,
// before the MCP server admits the call, so the refusal is audited as one (Accept and the
// orchestrator refuse it again: CurrentCatalog, a plan's check at submit).
func (m *Dispatcher) NotCurrent(ctx context.Context, kind catalog.Kind, ref string) error {
	_, err := m.d.Catalog.ResolveCurrent(ctx, kind, ref)
	var nc *view.NotCurrentError
	if errors.As(err, &nc) {
		return err
	}
	return nil
}

var _ mcpserver.LearnGate = (*Dispatcher)(nil)

// LearnTarget refuses a dispatch to a target in mode: learn before the MCP server admits the
// call, so its refusal is audited as one (Accept refuses it again: NoLearn).
func (m *Dispatcher) LearnTarget(target string) error {
	if m.d.Config == nil {
		return nil
	}
	t, err := m.d.Config.Target(target)
	if err != nil || t.Mode != config.ModeLearn {
		return nil // an unknown target is Accept's to report
	}
	target = cmp.Or(target, config.DefaultTarget)
	return fmt.Errorf("target %q is in learn mode (mode: learn in agora.yaml), which a person chose for it, not for an AI: %w; dispatch to another target, or ask a person to run `agora dispatch run --learn`", target, dispatch.ErrLearnFromMCP)
}

// LearnParent refuses an answer to a learn dispatch's question before the MCP server admits
// the call: the answer's dispatch would be a learn one (Accept refuses it again: NoLearn).
func (m *Dispatcher) LearnParent(ctx context.Context, id string) error {
	r, err := m.visible(ctx, id)
	if err != nil || !r.Learn {
		return nil // Resume reports an unknown dispatch, or one no MCP client may see, itself
	}
	return fmt.Errorf("dispatch %s is a learn dispatch, and its answer would be one: %w: learn mode is a person's decision; a person answers it with `agora dispatch resume`", id, dispatch.ErrLearnFromMCP)
}

func (m *Dispatcher) Get(ctx context.Context, id string) (*mcpserver.Record, error) {
	if r := m.ended.get(id); r != nil {
		return r, nil
	}
	if err := m.sup.Reap(ctx); err != nil {
		return nil, err
	}
	rec, err := m.visible(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.ended.put(record(rec)), nil
}

// visible returns the record of id if an MCP client may see it: never one on a repository
// path a person gave on the host's command line (no MCP client could have started it, and its
// patch, outputs and logs are that repository's).
func (m *Dispatcher) visible(ctx context.Context, id string) (*dispatch.Record, error) {
	rec, err := m.d.Records.Get(ctx, id)
	if err != nil {
		return nil, dispatchError(err)
	}
	if err := dispatch.MCPHidden(rec); err != nil {
		return nil, dispatchError(err)
	}
	return rec, nil
}

// Cancel cancels a dispatch an MCP client could have started; a run's attempt is cancelled
// through its run, on the host.
func (m *Dispatcher) Cancel(ctx context.Context, id string) (*mcpserver.Record, error) {
	cur, err := m.visible(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := dispatch.MCPReadOnly(cur); err != nil {
		return nil, dispatchError(err)
	}
	rec, err := m.d.Cancel(ctx, id)
	if err != nil {
		return nil, dispatchError(err)
	}
	return m.ended.put(record(rec)), nil
}

// Resume answers, for client p, the question of the dispatch id in needs_input: what `agora
// dispatch resume` does, recorded with the client as the actor and its ceiling as the role.
// The dispatcher refuses, and audits as refused, what p could not have dispatched itself and
// a question answered already.
func (m *Dispatcher) Resume(ctx context.Context, p mcpserver.Principal, id, answer string) (*mcpserver.Record, error) {
	if err := m.sup.Reap(ctx); err != nil {
		return nil, err
	}
	parent, err := m.d.Records.Get(ctx, id)
	if err != nil {
		return nil, dispatchError(err)
	}
	req, err := m.d.ResumeRequest(ctx, parent, answer, dispatch.Answerer{
		Actor: "mcp:" + p.Client, Via: dispatch.ViaMCP, Role: p.Ceiling.String()})
	if err != nil {
		return nil, dispatchError(err)
	}
	req.NoLearn = true // an answer over MCP never starts a learn dispatch
	return m.accept(ctx, req)
}

// Content reads stored content by digest from the blob store, which checks it against the
// digest; more than max bytes is refused.
func (m *Dispatcher) Content(_ context.Context, d string, max int64) ([]byte, error) {
	return m.d.Blobs.Get(digest.Digest(d), max)
}

// dispatchError maps the dispatcher's refusals onto the port's error contract.
func dispatchError(err error) error {
	var re *dispatch.RequestError
	switch {
	case errors.As(err, &re):
		return &mcpserver.RequestError{Msg: re.Error()}
	case errors.Is(err, dispatch.ErrNotFound):
		return mcpserver.ErrNotFound
	}
	return err
}
