package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

// Parse checks traceparent and returns its trace and span ids in hex; ok is false for a
// malformed one.
func Parse(traceparent string) (traceID, spanID string, sampled, ok bool) {
	sc := trace.SpanContextFromContext(Join(context.Background(), traceparent))
	if !sc.IsValid() {
		return "", "", false, false
	}
	return sc.TraceID().String(), sc.SpanID().String(), sc.IsSampled(), true
}

// Format is the version-00 traceparent of the ids (hex), sampled or not.
func Format(traceID, spanID string, sampled bool) string {
	flags := "00"
	if sampled {
		flags = "01"
	}
	return "00-" + traceID + "-" + spanID + "-" + flags
}
