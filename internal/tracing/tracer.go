package tracing

import (
	"context"
	"encoding/hex"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracer starts spans. A nil *Tracer and [Off] record nothing.
type Tracer struct {
	tp *sdktrace.TracerProvider // nil when off
	t  trace.Tracer
}

// Enabled reports whether spans leave the process.
func (t *Tracer) Enabled() bool { return t != nil && t.tp != nil }

// Shutdown flushes the buffered spans and stops the exporter; a no-op when off. It waits at
// most until ctx ends.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// End ends a span at the given time (zero means now) with errText as its error status (""
// for none; it must be a reason, never a message holding input) and further attributes.
type End = func(at time.Time, errText string, kv ...any)

func noEnd(time.Time, string, ...any) {}

// Start starts a span named name under the span in ctx (or the remote parent [Join] put
// there; none makes a root), at the given time (zero means now), with attributes kv given as
// alternating keys and values. It returns the context of the new span and its [End].
func (t *Tracer) Start(ctx context.Context, name string, at time.Time, kv ...any) (context.Context, End) {
	if !t.Enabled() {
		return ctx, noEnd
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs(kv)...)}
	if !at.IsZero() {
		opts = append(opts, trace.WithTimestamp(at))
	}
	preset := ctx.Value(idKey{}) != nil
	ctx, span := t.t.Start(ctx, name, opts...)
	if preset {
		// The ids were this span's; its children get their own.
		ctx = context.WithValue(ctx, idKey{}, presetIDs{})
	}
	return ctx, func(at time.Time, errText string, kv ...any) {
		if len(kv) > 0 {
			span.SetAttributes(attrs(kv)...)
		}
		if errText != "" {
			span.SetStatus(codes.Error, clip(errText))
		}
		if at.IsZero() {
			span.End()
			return
		}
		span.End(trace.WithTimestamp(at))
	}
}

// WithIDs returns ctx whose next span started by [Tracer.Start] has these ids (hex; an empty
// or malformed one is chosen at random). A trace id is honoured only for a root span: under
// a parent the span joins the parent's trace.
func (t *Tracer) WithIDs(ctx context.Context, traceID, spanID string) context.Context {
	if !t.Enabled() {
		return ctx
	}
	var p presetIDs
	if b, err := hex.DecodeString(traceID); err == nil && len(b) == len(p.trace) {
		copy(p.trace[:], b)
	}
	if b, err := hex.DecodeString(spanID); err == nil && len(b) == len(p.span) {
		copy(p.span[:], b)
	}
	return context.WithValue(ctx, idKey{}, p)
}

// Join is [Join] as a method, for the interfaces the instrumented packages declare.
func (*Tracer) Join(ctx context.Context, traceparent string) context.Context {
	return Join(ctx, traceparent)
}

// Traceparent is [Traceparent] as a method.
func (*Tracer) Traceparent(ctx context.Context) string { return Traceparent(ctx) }

// NewIDs is [NewIDs] when the tracer is enabled, and "" for both when it is off: a record
// made with tracing off has no trace.
func (t *Tracer) NewIDs() (traceID, spanID string) {
	if !t.Enabled() {
		return "", ""
	}
	return NewIDs()
}
