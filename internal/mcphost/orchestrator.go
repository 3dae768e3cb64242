package mcphost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/hostpath"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// Orchestrator is the MCP server's orchestrator port: the service's client, limited to
// submit, status and watch. A plan submitted over MCP names no repository: it reaches code
// only through its workspace (catalog workspaces are provisioned by people), and a run on a
// repository path a person gave on the command line is not shown at all.
type Orchestrator struct{ c *client.Client }

var _ mcpserver.Orchestrator = (*Orchestrator)(nil)

// NewOrchestrator returns the port over the service's client c.
func NewOrchestrator(c *client.Client) *Orchestrator { return &Orchestrator{c: c} }

// Submit starts a run of plan. The plan names no file (File is empty): it came as a JSON value,
// so its problems are placed by path alone (plan: tasks[3].deps: ...), never at a made-up line.
// newRun starts a new run even when a run of the same identity exists.
func (o *Orchestrator) Submit(ctx context.Context, actor string, plan json.RawMessage, newRun bool) (json.RawMessage, error) {
	resp, err := o.c.Submit(ctx, api.SubmitRequest{Source: plan, Actor: actor, NewRun: newRun})
	if err != nil {
		return nil, orchError(err)
	}
	// The service's own answer, as `agora orch submit -o json` prints it, less host paths.
	r := withoutPath(resp.Run)
	return json.Marshal(api.SubmitResponse{Run: r, Created: resp.Created, Why: resp.Why, Message: api.SubmitMessage(r, resp.Created, resp.Why)})
}

// withoutPath is r without a path on the host in any of its text: its repository's path (a
// workspace run has none) is cleared and hidden wherever else it occurs (a question an agent
// wrote after reading its git remote), and a task's reason and detail, which the host wrote,
// lose every absolute path (a failure names the path it looked at: "repository /x is not a
// directory"). The tasks are copied, never changed in place.
func withoutPath(r api.Run) api.Run {
	m := hostpath.New(r.Repo)
	r.Repo = ""
	tasks := make([]api.Task, len(r.Tasks))
	for i, t := range r.Tasks {
		t.Reason, t.Detail, t.Question = m.HostText(t.Reason), m.HostText(t.Detail), m.Text(t.Question)
		if t.Verdict != nil {
			// As agora_dispatch_describe shows it: the detail is the host's, the tail the command's.
			v := *t.Verdict
			v.Detail, v.OutputTail, v.Cache = m.HostText(v.Detail), m.Text(v.OutputTail), m.HostText(v.Cache)
			t.Verdict = &v
		}
		if t.Review != nil {
			rv := *t.Review
			rv.Reasons = make([]string, len(t.Review.Reasons))
			for j, reason := range t.Review.Reasons {
				rv.Reasons[j] = m.Text(reason)
			}
			t.Review = &rv
		}
		tasks[i] = t
	}
	if r.Tasks != nil {
		r.Tasks = tasks
	}
	return r
}

// hiddenRun returns why an MCP client may not see run r, or nil: a run on a repository path a
// person gave on the host's command line (agora orch submit --repo) is one no MCP client could
// have submitted, and its tasks' questions, details and patches are that repository's.
func hiddenRun(r api.Run) error {
	if r.Repo != "" && r.Workspace == "" {
		return &mcpserver.RequestError{Msg: fmt.Sprintf("run %s works on a repository path given on the host's command line "+
			"(agora orch submit --repo); over MCP only runs on a workspace, or on none, can be seen", r.ID)}
	}
	return nil
}

func (o *Orchestrator) Status(ctx context.Context, runID string) (json.RawMessage, error) {
	r, err := o.c.Status(ctx, runID)
	if err != nil {
		return nil, orchError(err)
	}
	if err := hiddenRun(r); err != nil {
		return nil, err
	}
	return json.Marshal(withoutPath(r))
}

// Watch waits until the run's state changes from what it was at the call, or it ends, or the
// timeout passes, and returns its status then. A run an MCP client may not see is refused
// before anything is watched. A run in needs_input is answered at once: only a person on the
// host moves it (its status's next says how), so waiting would only burn the caller's timeout.
func (o *Orchestrator) Watch(ctx context.Context, runID string, timeout time.Duration) (json.RawMessage, error) {
	now, err := o.Status(ctx, runID)
	if err != nil {
		return nil, err
	}
	var st struct {
		State string `json:"state"`
	}
	if json.Unmarshal(now, &st) == nil && st.State == lifecycle.RunNeedsInput {
		return now, nil
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var first, last *api.Run
	errChanged := errors.New("changed")
	err = o.c.Watch(wctx, runID, func(r *api.Run, _ *api.Event) error {
		if r == nil {
			return nil
		}
		last = r
		if r.State == lifecycle.RunNeedsInput {
			return errChanged // it came to wait for a person between the status and the stream
		}
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
	return json.Marshal(withoutPath(*last))
}

// orchError maps the client's errors onto the MCP server's: refusals become request
// errors (shown to the caller), a missing service the "not running" answer.
func orchError(err error) error {
	var ce *client.Error
	switch {
	case errors.Is(err, client.ErrNotRunning):
		return mcpserver.ErrOrchestratorDown
	case errors.As(err, &ce) && ce.Code == "not_found" && ce.Note != "":
		// The note (a run retention purged) reaches the caller; mcpserver names the id.
		return &errclass.NotFoundError{Note: ce.Note, Of: mcpserver.ErrNotFound}
	case errors.As(err, &ce) && ce.Code == "not_found":
		return mcpserver.ErrNotFound
	case errors.As(err, &ce) && (ce.Code == "invalid" || ce.Code == "conflict"):
		return &mcpserver.RequestError{Msg: ce.Msg}
	}
	return err
}
