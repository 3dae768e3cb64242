package mcpserver

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// PinGate is what a [Dispatcher] may also do: tell, before the call is admitted, that a
// version an MCP client pins (NAME@sha256:HEX) is one it may not start work from, since
// people superseded it or retired its name (docs/adr/0025). The guard then audits the call
// as denied (mcp.tool.denied) before anything happens; the dispatcher and the orchestrator
// refuse it again.
type PinGate interface {
	// NotCurrent returns the refusal of ref, of kind, when it pins a version that is not its
	// name's current one or a retired name's; nil for a current version and for a reference
	// it cannot place (the call says so itself).
	NotCurrent(ctx context.Context, kind catalog.Kind, ref string) error
}

// pinDenied is the [DeniedError] of arguments that pin a superseded or retired catalog
// version: agora_dispatch's subagent, env bundles and workspace (not a resume's child, which
// inherits its parent's versions), and every version a submitted plan pins. nil otherwise.
func (s *Server) pinDenied(ctx context.Context, args any) error {
	g, ok := s.cfg.Dispatcher.(PinGate)
	if !ok {
		return nil
	}
	var refs pinnedRefs
	switch a := args.(type) {
	case dispatchArgs:
		if a.Resume != nil {
			return nil
		}
		if a.Subagent != nil {
			refs.add(catalog.KindSubagent, *a.Subagent)
		}
		for _, e := range a.Envs {
			refs.add(catalog.KindEnv, e)
		}
		if a.Workspace != nil {
			refs.add(catalog.KindWorkspace, *a.Workspace)
		}
	case submitArgs:
		refs = planPins(ctx, a.Plan)
	default:
		return nil
	}
	for _, r := range refs {
		if err := g.NotCurrent(ctx, r.kind, r.ref); err != nil {
			return &DeniedError{Msg: err.Error()}
		}
	}
	return nil
}

type pinnedRef struct {
	kind catalog.Kind
	ref  string
}

// pinnedRefs are the references written with a version, each once, in the order met.
type pinnedRefs []pinnedRef

func (p *pinnedRefs) add(kind catalog.Kind, ref string) {
	if !strings.Contains(ref, "@") {
		return
	}
	for _, r := range *p {
		if r.kind == kind && r.ref == ref {
			return
		}
	}
	*p = append(*p, pinnedRef{kind, ref})
}

// planPins lists the versions a plan pins: its tasks' (fan-out templates', reviewers',
// fixers') subagents, env bundles and its workspace, as the plan's own catalog check meets
// them. A plan that does not read is the orchestrator's to refuse; what did read is listed.
func planPins(ctx context.Context, raw json.RawMessage) pinnedRefs {
	var r pinRecorder
	plan.Validate(ctx, "", raw, &r)
	return r.refs
}

// pinRecorder is a [plan.Refs] that finds every reference and records those with a version.
type pinRecorder struct{ refs pinnedRefs }

func (r *pinRecorder) Subagent(_ context.Context, ref string) error {
	r.refs.add(catalog.KindSubagent, ref)
	return nil
}

func (r *pinRecorder) Reviewer(_ context.Context, ref, _ string) error {
	r.refs.add(catalog.KindSubagent, ref)
	return nil
}

func (r *pinRecorder) Env(_ context.Context, ref string) error {
	r.refs.add(catalog.KindEnv, ref)
	return nil
}

func (r *pinRecorder) Workspace(_ context.Context, ref, _ string) error {
	r.refs.add(catalog.KindWorkspace, ref)
	return nil
}

func (r *pinRecorder) Target(context.Context, string) error { return nil }
func (r *pinRecorder) Queue(context.Context, string) error  { return nil }
