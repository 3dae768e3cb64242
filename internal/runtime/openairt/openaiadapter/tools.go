package openaiadapter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/openairt"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/toolreg"
	"github.com/agora-dev/agora/internal/toolreg/builtin"
)

// errNotAudited is what the model reads when its call's decision did not reach the audit
// log: the call fails and the dispatch stops.
var errNotAudited = errors.New("the call could not be recorded in the audit log; the dispatch stops")

// toolAuditor is the view's [toolreg.Auditor]: it reports each decision to the gateway
// synchronously. A decision that cannot be reported fails closed: the first failure is kept
// and stop is called, which ends the loop.
type toolAuditor struct {
	gw   *agentrun.Gateway
	stop func(error)

	mu  sync.Mutex
	err error // guarded by mu: the first report that failed
}

func (a *toolAuditor) ToolCall(ctx context.Context, d toolreg.Decision) {
	if err := a.gw.ReportTool(ctx, d); err != nil {
		a.ToolCallFailed(err)
	}
}

// WouldDeny reports a learn view's would_deny; the call runs only when it returns nil. A
// failure also stops the dispatch, as any report's does.
func (a *toolAuditor) WouldDeny(ctx context.Context, d toolreg.Decision) error {
	err := a.gw.Report(ctx, agentrun.ToolReport{Tool: d.Tool, Decision: d.Decision, Reason: d.Reason, ArgsHash: d.ArgsHash, Command: d.Command})
	if err != nil {
		a.ToolCallFailed(err)
		return errNotAudited
	}
	return nil
}

// wouldDenyFile reports a learn dispatch's write outside the workspace; the write is made
// (into the scratch directory) only when it returns nil. A failure stops the dispatch, as
// any report's does.
func (a *toolAuditor) wouldDenyFile(ctx context.Context, r agentrun.FileReport) error {
	if err := a.gw.ReportFile(ctx, r); err != nil {
		a.ToolCallFailed(err)
		return errNotAudited
	}
	return nil
}

// ToolCallFailed keeps err as the first failed report and stops the loop.
func (a *toolAuditor) ToolCallFailed(err error) {
	a.mu.Lock()
	a.err = cmp.Or(a.err, err)
	a.mu.Unlock()
	if a.stop != nil {
		a.stop(err)
	}
}

// failed returns the first report that failed, or nil.
func (a *toolAuditor) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// newView builds the built-in tools over inv and returns the view of inv's role: only the
// granted tools, each call audited through a.
func newView(inv agentrun.Invocation, gw *agentrun.Gateway, a *toolAuditor) (*toolreg.View, error) {
	reg := toolreg.NewRegistry()
	env := builtin.Env{Workspace: inv.Dir, CommandEnv: inv.Env, Fetch: gw.Fetch}
	if inv.Learn {
		scratch, err := builtin.NewScratch(inv.Tmp, inv.Dir)
		if err != nil {
			return nil, err
		}
		env.LearnWrites = &builtin.LearnWrites{Scratch: scratch, Record: func(ctx context.Context, path, op, reason string) error {
			return a.wouldDenyFile(ctx, agentrun.FileReport{Tool: "write_file", Path: path, Op: op, Reason: reason})
		}}
	}
	if err := builtin.Register(reg, env); err != nil {
		return nil, err
	}
	// The recorded hash is of the arguments with the bundle's secret values masked, so it
	// cannot confirm a guess of one.
	red := redact.New(inv.Secrets)
	opts := []toolreg.ViewOption{toolreg.WithRedactor(red.Bytes), toolreg.WithApprover(&gatewayApprover{gw: gw})}
	if inv.Learn {
		opts = append(opts, toolreg.WithLearn())
	}
	return reg.For(inv.DispatchID, inv.Role, inv.Grants, a, opts...), nil
}

// viewTools is a [toolreg.View] as the openai loop's [openairt.Tools].
type viewTools struct {
	view  *toolreg.View
	audit *toolAuditor
}

func (t viewTools) List() []openairt.ToolSpec {
	infos := t.view.List()
	out := make([]openairt.ToolSpec, len(infos))
	for i, info := range infos {
		out[i] = openairt.ToolSpec{Name: info.Name, Description: info.Description, Parameters: info.Schema}
	}
	return out
}

func (t viewTools) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	res, err := t.view.Call(ctx, name, args)
	if t.audit.failed() != nil {
		return "", errNotAudited
	}
	var ni *toolreg.NeedsInput
	if errors.As(err, &ni) {
		return "", question(ni.Question)
	}
	if err != nil {
		return "", err
	}
	return res.Content, nil
}

// question is the error that ends the loop with a question for a person.
type question string

func (q question) Error() string      { return fmt.Sprintf("needs input: %d-byte question", len(q)) }
func (q question) NeedsInput() string { return string(q) }
