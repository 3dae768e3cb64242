package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator is W3C Trace Context only: traceparent and tracestate, no baggage (baggage
// would carry whatever a caller puts in it into every downstream request).
var propagator = propagation.TraceContext{}

// Join returns ctx with the remote span traceparent names as its parent. A malformed or
// empty traceparent leaves ctx as it is (a new root), never an error: a caller's header is
// a hint, not something to refuse a request for.
func Join(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" || len(traceparent) > maxTraceparent {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// maxTraceparent bounds what is parsed: version 00 is 55 bytes, later versions may append.
const maxTraceparent = 512

// Traceparent is the W3C traceparent of the span in ctx, or "" when there is none.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// Extract wraps h so a request's traceparent header becomes the parent of what its handler
// starts (a run submitted, a dispatch accepted). A malformed header is ignored.
func Extract(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("traceparent"); v != "" {
			r = r.WithContext(Join(r.Context(), v))
		}
		h.ServeHTTP(w, r)
	})
}
