package mcpserver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// BenchmarkWaiters_OneDispatch: 64 callers wait at once on one running dispatch through
// agora_dispatch with wait_seconds 1 (the wait every caller of agora_dispatch has); reads/op
// is how many times the server read the dispatch's record during the second they waited.
// The waiters share one poll; the baseline is each waiter polling the record itself, which
// this benchmark measures when compiled against a tree without the shared poll.
func BenchmarkWaiters_OneDispatch(b *testing.B) {
	const waiters = 64
	var gets atomic.Int64
	fx := newFixture()
	fx.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		return record(dispatchID, "started"), nil
	}
	fx.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		gets.Add(1)
		return record(id, "started"), nil
	}
	cs := fx.stdio(b, mcpserver.Principal{Client: "lead", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{Rate: 1e6, Burst: 1e6})
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch", Arguments: map[string]any{"subagent": "writer", "wait_seconds": 1}})
				if err != nil || res.IsError {
					b.Errorf("dispatch: %v %v", err, res)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(gets.Load())/float64(b.N), "reads/op")
	b.ReportMetric(float64(gets.Load())/float64(b.N)/waiters, "reads/waiter")
}
