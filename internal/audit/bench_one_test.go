package audit_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
)

// BenchmarkBatcherOne appends entries one at a time through a [audit.Batcher], each waiting
// for its commit before the next: the cost of a transaction of one entry, which is what an
// MCP server's tool call pays when its callers do not overlap. dense stores every tree node,
// sparse from level 4 up ([audit.Log.SparseTree]).
func BenchmarkBatcherOne(b *testing.B) {
	for _, c := range []struct {
		name string
		log  *audit.Log
	}{{"dense", audit.New(nil)}, {"sparse", audit.New(nil).SparseTree()}} {
		b.Run(c.name, func(b *testing.B) {
			db, _ := openDB(b)
			fill(b, db, 10000)
			bat := audit.NewBatcher(db, c.log)
			ctx, cancel := context.WithCancel(context.Background())
			var runner sync.WaitGroup
			runner.Go(func() { bat.Run(ctx) })
			defer runner.Wait()
			defer cancel()
			b.ResetTimer()
			defer reportCPU(b)()
			i := 0
			for b.Loop() {
				if err := bat.Append(ctx, benchEntry(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
