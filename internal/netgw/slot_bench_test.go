package netgw

import (
	"context"
	"fmt"
	"testing"
	"time"

	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// BenchmarkSlotClaim measures the network gateway's part of a warm start: from the
// host binding a dispatch to a slot whose worker already waits on the gateway to that worker
// holding the dispatch's client and having read its session (GET session), against the cold
// path's same steps (export the session, a new client, GET session). Each op is one dispatch;
// the waiting worker is set up outside the timer. The pod's own start is not in either.
func BenchmarkSlotClaim(b *testing.B) {
	g := withSlots(b, nil)
	ctx := context.Background()
	b.Run("warm", func(b *testing.B) {
		i := 0
		for b.Loop() {
			b.StopTimer()
			id := fmt.Sprintf("01BW%06d", i)
			i++
			sl, err := g.slots().Create(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got := make(chan *workerremote.Client, 1)
			go func() {
				c, err := workerremote.Claim(ctx, g.url, sl.ID, sl.Token, g.ca, nil)
				if err != nil {
					b.Error(err)
				}
				got <- c
			}()
			time.Sleep(30 * time.Millisecond) // the worker's claim is waiting on the gateway
			b.StartTimer()
			s := g.exportBare(b, id)
			if err := sl.Bind(ctx, s.Dispatch, s.Token); err != nil {
				b.Fatal(err)
			}
			c := <-got
			if _, err := c.Info(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			c.Close()
			s.Close()
			b.StartTimer()
		}
	})
	b.Run("cold", func(b *testing.B) {
		i := 0
		for b.Loop() {
			s := g.exportBare(b, fmt.Sprintf("01BC%06d", i))
			i++
			c, err := workerremote.NewClient(g.url, s.Dispatch, s.Token, g.ca)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Info(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			c.Close()
			s.Close()
			b.StartTimer()
		}
	})
}
