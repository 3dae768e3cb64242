package cli

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/tracing"
)

// traceFlushTimeout bounds the flush of buffered spans when a command ends: an unreachable
// collector must not hold a finished command (or a supervisor) for long.
const traceFlushTimeout = 5 * time.Second

// Tracer is the process's tracer from the OTEL_* variables: off (free) without an endpoint.
// An unsupported setting is an error the command reports before it does anything.
func (f *Factory) Tracer(ctx context.Context) (*tracing.Tracer, error) {
	if f.tracer != nil {
		return f.tracer, nil
	}
	log := slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t, err := tracing.FromEnv(ctx, f.Getenv, log)
	if err != nil {
		return nil, err
	}
	f.tracer = t
	return t, nil
}

// flushTraces exports what the command's spans left buffered: serve's stop, a dispatch
// run's end and a supervisor's end all pass here.
func (f *Factory) flushTraces(ctx context.Context) {
	if f.tracer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
	defer cancel()
	_ = f.tracer.Shutdown(ctx) // an export failure was logged by the tracer's error handler
	f.tracer = nil
}

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
