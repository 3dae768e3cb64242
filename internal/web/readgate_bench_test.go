package web

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// chanGate is a reads gate without fair queuing (one semaphore shared by every
// client), kept here as the baseline of BenchmarkReadGate.
type chanGate chan struct{}

func (g chanGate) enter(ctx context.Context) bool {
	t := time.NewTimer(readWait)
	defer t.Stop()
	select {
	case g <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

func (g chanGate) leave(start time.Time) {
	if d := time.Since(start); d > time.Millisecond {
		time.AfterFunc(d, func() { <-g })
		return
	}
	<-g
}

// BenchmarkReadGate measures what a turn of the reads gate costs a read (enter and leave
// around an empty read, so no pause), the old shared semaphore against the fair gate: alone,
// and with 8 goroutines of 4 clients contending for maxReads turns (every turn then waits).
func BenchmarkReadGate(b *testing.B) {
	ctx := context.Background()
	for _, clients := range []int{0, 4} {
		name := "alone"
		if clients > 0 {
			name = fmt.Sprintf("contended-%dclients", clients)
		}
		b.Run("old/"+name, func(b *testing.B) {
			g := make(chanGate, maxReads)
			benchTurns(b, clients, func(string) {
				if !g.enter(ctx) {
					b.Error("no turn")
					return
				}
				g.leave(time.Now())
			})
		})
		b.Run("fair/"+name, func(b *testing.B) {
			g := newGate(maxReads)
			benchTurns(b, clients, func(client string) {
				if err := g.enter(ctx, client); err != nil {
					b.Error(err)
					return
				}
				g.leave(time.Now())
			})
		})
	}
}

// benchTurns runs turn b.N times: in one goroutine when clients is 0, and otherwise in parallel,
// the goroutines spread over clients names.
func benchTurns(b *testing.B, clients int, turn func(client string)) {
	b.ReportAllocs()
	if clients == 0 {
		for b.Loop() {
			turn("bob")
		}
		return
	}
	var next atomic.Int32
	b.SetParallelism(4) // 4 per GOMAXPROCS: 8 goroutines on two cores
	b.RunParallel(func(pb *testing.PB) {
		client := fmt.Sprintf("c%d", next.Add(1)%int32(clients))
		for pb.Next() {
			turn(client)
		}
	})
}
