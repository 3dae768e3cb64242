package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// Orchestrator is the MCP server's orchestrator port: the service's client, limited to
// submit, status and watch. A plan submitted over MCP gets no repository: its tasks start in
// empty workspaces (a person chooses repositories, on the command line).
type Orchestrator struct{ c *client.Client }

var _ mcpserver.Orchestrator = (*Orchestrator)(nil)

// NewOrchestrator returns the port over the service's client c.
func NewOrchestrator(c *client.Client) *Orchestrator { return &Orchestrator{c: c} }

func (o *Orchestrator) Submit(ctx context.Context, actor string, plan json.RawMessage) (json.RawMessage, error) {
	resp, err := o.c.Submit(ctx, api.SubmitRequest{File: "plan.json", Source: plan, Actor: actor})
	if err != nil {
		return nil, orchError(err)
	}
	return json.Marshal(resp)
}

func (o *Orchestrator) Status(ctx context.Context, runID string) (json.RawMessage, error) {
	r, err := o.c.Status(ctx, runID)
	if err != nil {
		return nil, orchError(err)
	}
	return json.Marshal(r)
}

// Watch waits until the run's state changes from what it was at the call, or it ends, or the
// timeout passes, and returns its status then.
func (o *Orchestrator) Watch(ctx context.Context, runID string, timeout time.Duration) (json.RawMessage, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var first, last *api.Run
	errChanged := errors.New("changed")
	err := o.c.Watch(wctx, runID, func(r *api.Run, _ *api.Event) error {
		if r == nil {
			return nil
		}
		last = r
		if first == nil {
			first = r
			return nil
		}
		if r.State != first.State {
			return errChanged
		}
		return nil
	})
	switch {
	case errors.Is(err, errChanged), err == nil:
	case wctx.Err() != nil && ctx.Err() == nil:
		// The timeout passed: answer with the latest status.
	default:
		return nil, orchError(err)
	}
	if last == nil {
		return o.Status(ctx, runID)
	}
	return json.Marshal(last)
}

// orchError maps the client's errors onto the MCP server's: refusals become request
// errors (shown to the caller), a missing service the "not running" answer.
func orchError(err error) error {
	var ce *client.Error
	switch {
	case errors.Is(err, client.ErrNotRunning):
		return mcpserver.ErrOrchestratorDown
	case errors.As(err, &ce) && ce.Code == "not_found":
		return mcpserver.ErrNotFound
	case errors.As(err, &ce) && (ce.Code == "invalid" || ce.Code == "conflict"):
		return &mcpserver.RequestError{Msg: ce.Msg}
	}
	return err
}
