package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/tracing"
	"github.com/agora-dev/agora/internal/tracing/otlprecv"
)

// BenchmarkDispatchTraceOverhead is what tracing adds to one dispatch, host side: choosing
// its ids at accept, the accept span, the dispatch span, its five phase spans, and the
// gateway's spans of ten model calls and ten tool decisions, with tracing off (no endpoint)
// and on (exported over OTLP/HTTP to a receiver on loopback, batched).
func BenchmarkDispatchTraceOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("traced=%v", on), func(b *testing.B) {
			tr := tracing.Off()
			if on {
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
			d := &Dispatcher{Tracer: tr}
			ctx := context.Background()
			caller := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := &Record{ID: "01J9Z3K4M5N6P7Q8R9S0T1V2W3", Subagent: "reader", Target: "local", State: lifecycle.DispatchFinished, CreatedAt: time.Now()}
				r.TraceID, r.TraceSpan, r.TraceParent = d.traceIDs(ctx, caller)
				d.traceAccept(ctx, r, time.Now())
				sp := d.startDispatchSpan(ctx, r)
				gw := gatewayTracer(sp)
				for _, p := range []string{PhaseStaging, PhaseSandbox, PhaseAgent} {
					sp.phase(phaseSpan(p))
				}
				for j := 0; j < 10 && gw != nil; j++ {
					now := time.Now()
					m := gw.Span(nil, "chat gpt-test", now, now, "", "gen_ai.operation.name", "chat", "gen_ai.usage.input_tokens", int64(100))
					gw.Span(m, "execute_tool read_file", now, now, "", "gen_ai.tool.name", "read_file", "agora.tool.decision", "allowed")
				}
				sp.phase(phaseSpan(PhaseCapture))
				sp.phase(SpanReconcile)
				sp.finish(r)
			}
		})
	}
}
