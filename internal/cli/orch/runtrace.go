package orch

import (
	"net/http"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/tracing"
)

// runTrace places a run submitted to serve in a trace: under the request's traceparent (a
// malformed one is ignored), else in a new trace when tracing is on, else none.
func runTrace(t *tracing.Tracer) func(*http.Request) orch.Trace {
	return func(r *http.Request) orch.Trace {
		_, span := tracing.NewIDs()
		if parent := tracing.Traceparent(tracing.Join(r.Context(), r.Header.Get("traceparent"))); parent != "" {
			return orch.Trace{ID: parent[3:35], Span: span, Parent: parent}
		}
		if !t.Enabled() {
			return orch.Trace{}
		}
		id, span := tracing.NewIDs()
		return orch.Trace{ID: id, Span: span}
	}
}
