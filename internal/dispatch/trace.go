package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/modelgw"
)

// Tracer is how a dispatch's spans leave the process (package tracing implements it over
// OpenTelemetry; dispatch links none). Spans carry ids, names, states and reasons only:
// never an environment value, a key, the input, a prompt, a response or file content.
type Tracer interface {
	// Enabled reports whether spans are exported at all.
	Enabled() bool
	// NewIDs returns a fresh trace id and span id in hex, "" for both when disabled.
	NewIDs() (traceID, spanID string)
	// Join returns ctx under the remote span traceparent names; a malformed one is ignored.
	Join(ctx context.Context, traceparent string) context.Context
	// WithIDs makes the next span started from ctx take these ids.
	WithIDs(ctx context.Context, traceID, spanID string) context.Context
	// Traceparent is the traceparent of the span in ctx, "" without one.
	Traceparent(ctx context.Context) string
	// Start starts a span at the given time (zero is now) with attributes kv (alternating
	// keys and values) and returns its context and the function that ends it.
	Start(ctx context.Context, name string, at time.Time, kv ...any) (context.Context, func(at time.Time, errText string, kv ...any))
}

// Span names of a dispatch: the dispatch itself and its phases, children of it.
const (
	SpanDispatch  = "agora.dispatch"
	SpanAccept    = "agora.dispatch.accept"
	SpanReconcile = "agora.dispatch.reconcile"
)

// phaseSpan names the span of a host-side phase.
func phaseSpan(phase string) string { return "agora.dispatch." + phase }

// traceIDs places a dispatch being accepted in a trace: under the caller's traceparent (the
// request's, else the span in ctx: an MCP request's or a task's), or in a new trace when
// tracing is on. The dispatch span's id is chosen now, so the accept span (here) and the
// supervisor (maybe another process) name the same span.
func (d *Dispatcher) traceIDs(ctx context.Context, traceparent string) (traceID, spanID, parent string) {
	if d.Tracer == nil {
		return "", "", ""
	}
	if traceparent == "" {
		traceparent = d.Tracer.Traceparent(ctx)
	}
	parent = d.Tracer.Traceparent(d.Tracer.Join(context.Background(), traceparent))
	_, spanID = d.Tracer.NewIDs()
	if parent != "" {
		return parent[3:35], spanID, parent
	}
	traceID, spanID = d.Tracer.NewIDs()
	return traceID, spanID, ""
}

// spanContext is ctx under the dispatch span of r, as a remote parent (the span itself is
// the supervisor's); ctx unchanged when r has no span.
func (d *Dispatcher) spanContext(ctx context.Context, r *Record) context.Context {
	if d.Tracer == nil || r.TraceSpan == "" {
		return ctx
	}
	flags := "01"
	if len(r.TraceParent) == 55 {
		flags = r.TraceParent[53:]
	}
	return d.Tracer.Join(ctx, "00-"+r.TraceID+"-"+r.TraceSpan+"-"+flags)
}

// traceAccept records the accept span of r, begun at began, under r's dispatch span.
func (d *Dispatcher) traceAccept(ctx context.Context, r *Record, began time.Time) {
	if d.Tracer == nil || !d.Tracer.Enabled() || r.TraceSpan == "" {
		return
	}
	_, end := d.Tracer.Start(d.spanContext(context.WithoutCancel(ctx), r), SpanAccept, began, "agora.dispatch.id", r.ID)
	end(time.Time{}, "")
}

// dispatchSpan is the supervisor's span of one dispatch and of its current phase.
type dispatchSpan struct {
	t         Tracer
	ctx       context.Context // the dispatch span's
	end       func(time.Time, string, ...any)
	mu        sync.Mutex
	phaseCtx  context.Context
	phaseEnd  func(time.Time, string, ...any)
	phaseName string   // the current phase span's name; "" for none
	caps      []string // the subagent's capability names, known once its content is loaded
}

// setCapabilities notes the names of the subagent's capabilities for the dispatch span.
func (s *dispatchSpan) setCapabilities(pins []catalog.Pin) {
	if s == nil {
		return
	}
	for _, p := range pins {
		s.caps = append(s.caps, p.Name)
	}
}

// startDispatchSpan starts r's dispatch span under its parent, with the id chosen at accept
// and the accept time as its start; nil when r has no trace or tracing is off.
func (d *Dispatcher) startDispatchSpan(ctx context.Context, r *Record) *dispatchSpan {
	if d.Tracer == nil || !d.Tracer.Enabled() || r.TraceID == "" {
		return nil
	}
	parent := d.Tracer.Join(context.WithoutCancel(ctx), r.TraceParent)
	parent = d.Tracer.WithIDs(parent, r.TraceID, r.TraceSpan)
	sctx, end := d.Tracer.Start(parent, SpanDispatch, r.CreatedAt,
		"agora.dispatch.id", r.ID, "agora.subagent", r.Subagent, "agora.subagent.digest", string(r.SubagentDigest),
		"agora.target", r.Target, "agora.sandbox", r.Sandbox, "agora.network", r.Network)
	return &dispatchSpan{t: d.Tracer, ctx: sctx, end: end, phaseCtx: sctx}
}

// phase ends the current phase's span and starts the next one's ("" starts none).
func (s *dispatchSpan) phase(name string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enterLocked(name)
}

// enterLocked is phase with s.mu held. Entering the phase that is already current does
// nothing: the agent's span may have begun at the first model call (gatewaySpans.Current).
func (s *dispatchSpan) enterLocked(name string) {
	if name != "" && name == s.phaseName {
		return
	}
	if s.phaseEnd != nil {
		s.phaseEnd(time.Time{}, "")
		s.phaseCtx, s.phaseEnd, s.phaseName = s.ctx, nil, ""
	}
	if name != "" {
		s.phaseCtx, s.phaseEnd = s.t.Start(s.ctx, name, time.Time{}, "agora.phase", name)
		s.phaseName = name
	}
}

// finish ends the phase and the dispatch span with the final record's state.
func (s *dispatchSpan) finish(r *Record) {
	if s == nil {
		return
	}
	s.phase("")
	errText := ""
	if r.State != lifecycle.DispatchFinished {
		errText = r.State
		if r.Reason != "" {
			errText += "/" + r.Reason
		}
	}
	kv := []any{"agora.dispatch.state", r.State, "agora.dispatch.reason", r.Reason, "agora.capabilities", s.caps}
	if r.ExitCode != nil {
		kv = append(kv, "agora.exit_code", *r.ExitCode)
	}
	s.end(time.Time{}, errText, kv...)
}

// gatewaySpans is the gateway's [modelgw.Tracer]: its spans are children of the dispatch's
// current phase (the agent's, when the sandbox calls), or of the span they name.
type gatewaySpans struct{ s *dispatchSpan }

var _ modelgw.Tracer = gatewaySpans{}

func (g gatewaySpans) Span(parent context.Context, name string, start, end time.Time, errText string, kv ...any) context.Context {
	if parent == nil {
		g.s.mu.Lock()
		parent = g.s.phaseCtx
		g.s.mu.Unlock()
	}
	ctx, done := g.s.t.Start(parent, name, start, kv...)
	done(end, errText)
	return ctx
}

// Current is the dispatch's current phase's context.
func (g gatewaySpans) Current() context.Context {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	// The gateway asks at each request it serves, and only a worker already running in the
	// sandbox reaches it: the agent phase ("the worker runs in the sandbox") has begun. A
	// request that arrives while the host still shows the sandbox starting (the supervisor
	// enters the agent phase after it has recorded the start, and a warm worker can call
	// first) begins the agent span now; the host's own entry into it later changes nothing
	// (CI: a model call's span fell under the sandbox phase).
	if g.s.phaseName == phaseSpan(PhaseSandbox) {
		g.s.enterLocked(phaseSpan(PhaseAgent))
	}
	return g.s.phaseCtx
}

// gatewayTracer is the gateway's tracer for s, nil without one.
func gatewayTracer(s *dispatchSpan) modelgw.Tracer {
	if s == nil {
		return nil
	}
	return gatewaySpans{s}
}
