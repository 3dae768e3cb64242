package orch_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/obs"
	"github.com/agora-dev/agora/internal/orch"
)

// BenchmarkTransitionObserved is BenchmarkTransition's cycle (ready, fired, succeeded, with
// 1,000 finished tasks in the database) without an observer and with serve's: Prometheus
// metrics and a JSON log line per transition (to a discarding writer, so the cost measured
// is the instrumentation's, not a terminal's).
func BenchmarkTransitionObserved(b *testing.B) {
	for _, observed := range []bool{false, true} {
		b.Run(fmt.Sprintf("observed=%v", observed), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "orch.db")
			seedHistory(b, path, 1000)
			db := openDB(b, path)
			var opts orch.Options
			if observed {
				opts.Observer = &obs.EngineObserver{Metrics: obs.NewMetrics(), Log: slog.New(slog.NewJSONHandler(discard{}, nil))}
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
				h.runToEnd(mkPlan(b, fmt.Sprintf("one-%d", i), 1, spec{ID: "t"}))
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
