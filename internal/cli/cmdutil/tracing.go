package cmdutil

import (
	"context"
	"log/slog"
	"time"

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

// FlushTraces exports what the command's spans left buffered: serve's stop, a dispatch
// run's end and a supervisor's end all pass here.
func (f *Factory) FlushTraces(ctx context.Context) {
	if f.tracer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
	defer cancel()
	_ = f.tracer.Shutdown(ctx) // an export failure was logged by the tracer's error handler
	f.tracer = nil
}
