package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"
)

// spanLog is a Tracer that records the spans started and ended, each span's context naming it.
type spanLog struct {
	events []string
}

type spanKey struct{}

func (l *spanLog) Enabled() bool                                            { return true }
func (l *spanLog) NewIDs() (string, string)                                 { return "", "" }
func (l *spanLog) Join(ctx context.Context, _ string) context.Context       { return ctx }
func (l *spanLog) WithIDs(ctx context.Context, _, _ string) context.Context { return ctx }
func (l *spanLog) Traceparent(context.Context) string                       { return "" }
func (l *spanLog) Start(ctx context.Context, name string, _ time.Time, _ ...any) (context.Context, func(time.Time, string, ...any)) {
	l.events = append(l.events, "start "+name)
	return context.WithValue(ctx, spanKey{}, name), func(time.Time, string, ...any) { l.events = append(l.events, "end "+name) }
}

// TestTrace_ModelCallDuringSandboxPhaseIsTheAgents (a model call's span fell
// under the sandbox phase, because the supervisor enters the agent phase only after it has
// recorded the start, and the worker called first): a model call that arrives while the span
// shows the sandbox phase begins the agent phase's span and falls under it; the supervisor's
// own entry into the agent phase then starts no second span. Before the sandbox phase (a
// request during staging) nothing moves.
func TestTrace_ModelCallDuringSandboxPhaseIsTheAgents(t *testing.T) {
	l := &spanLog{}
	root := context.WithValue(context.Background(), spanKey{}, SpanDispatch)
	s := &dispatchSpan{t: l, ctx: root, phaseCtx: root}
	g := gatewaySpans{s}

	s.phase(phaseSpan(PhaseStaging))
	if got := g.Current().Value(spanKey{}); got != phaseSpan(PhaseStaging) {
		t.Fatalf("a call during staging falls under %v, want the staging span unchanged", got)
	}
	s.phase(phaseSpan(PhaseSandbox))
	if got := g.Current().Value(spanKey{}); got != phaseSpan(PhaseAgent) {
		t.Fatalf("a model call during the sandbox phase falls under %v, want the agent phase", got)
	}
	s.phase(phaseSpan(PhaseAgent)) // the supervisor's own entry, later
	s.phase(phaseSpan(PhaseCapture))
	want := []string{
		"start " + phaseSpan(PhaseStaging), "end " + phaseSpan(PhaseStaging),
		"start " + phaseSpan(PhaseSandbox), "end " + phaseSpan(PhaseSandbox),
		"start " + phaseSpan(PhaseAgent), "end " + phaseSpan(PhaseAgent),
		"start " + phaseSpan(PhaseCapture),
	}
	if !slices.Equal(l.events, want) {
		t.Fatalf("spans %q,\nwant %q (one agent span, begun at the model call)", l.events, want)
	}
}
