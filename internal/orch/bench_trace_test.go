package orch_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/obs"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/tracing"
	"github.com/agora-dev/agora/internal/tracing/otlprecv"
)

// BenchmarkTransitionTraced is BenchmarkTransitionObserved's cycle (submit, ready, fired,
// succeeded, with 1,000 finished tasks in the database) with tracing off (no endpoint: the
// run has no trace) and on (every run traced, its run and task spans exported over
// OTLP/HTTP to a receiver on loopback, batched as in serve).
func BenchmarkTransitionTraced(b *testing.B) {
	for _, traced := range []bool{false, true} {
		b.Run(fmt.Sprintf("traced=%v", traced), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "orch.db")
			seedHistory(b, path, 1000)
			db := openDB(b, path)
			tr := tracing.Off()
			if traced {
				recv := otlprecv.Start(b)
				b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
				var err error
				if tr, err = tracing.FromEnv(context.Background(), func(k string) string {
					return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": recv.URL}[k]
				}, nil); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { tr.Shutdown(context.Background()) })
			}
			var opts orch.Options
			if spans := obs.NewEngineSpans(tr); spans != nil {
				opts.Observer = &obs.EngineObserver{Spans: spans}
			}
			eng, err := orch.Open(context.Background(), db, audit.New(nil), newNoopExec(), opts)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			h := &harness{tb: b, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
			go func() { h.done <- eng.Run(ctx) }()
			b.Cleanup(h.stop)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var co orch.Checkout
				if traced {
					id, span := tracing.NewIDs()
					co.Trace = orch.Trace{ID: id, Span: span}
				}
				ch, stop := eng.Subscribe("*")
				id, _, err := eng.Submit(context.Background(), mkPlan(b, fmt.Sprintf("one-%d", i), 1, spec{ID: "t"}), co, "bench")
				if err != nil {
					b.Fatal(err)
				}
				for ev := range ch {
					if ev.Kind == "orch.run.ended" && ev.Run == id {
						break
					}
				}
				stop()
			}
		})
	}
}
