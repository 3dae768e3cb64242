package dispatch_test

import (
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
)

// BenchmarkDockerWarm_NoOp is a whole no-op dispatch (accept to finished record) on a docker
// target, cold and warm, in the same process and run: "cold" on a target without slots (the
// container created and started for the dispatch, its files bound in), "warm" on a target
// with warm: 1 (a slot container claimed over the gateway's socket, its files fetched). Before
// each warm op the timer stops until the pool has refilled its slot: a resident process fills
// ahead. Run with -count to interleave the two.
func BenchmarkDockerWarm_NoOp(b *testing.B) {
	e, w := dockerWarmEnvWith(b, 1, "boxcold")
	e.subagent("noop", `true`)
	req := func(target string) dispatch.Request {
		return dispatch.Request{Subagent: "noop", Target: target, Timeout: 2 * time.Minute}
	}
	// The warm target's first dispatch teaches its pool the shape.
	wantFinished(b, e.run(req("box")))
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			wantFinished(b, e.run(req("boxcold")))
		}
	})
	b.Run("warm", func(b *testing.B) {
		claimed := boxCounts(w).Claimed
		for b.Loop() {
			b.StopTimer()
			deadline := time.Now().Add(2 * time.Minute)
			for boxCounts(w).Ready < 1 {
				if time.Now().After(deadline) {
					b.Fatalf("no slot ready: %+v", boxCounts(w))
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.StartTimer()
			wantFinished(b, e.run(req("box")))
		}
		if c := boxCounts(w); c.Claimed-claimed != uint64(b.N) {
			b.Fatalf("claimed %d of %d warm dispatches: %+v", c.Claimed-claimed, b.N, c)
		}
	})
}

// BenchmarkDockerWarm_ProxyNoOp is BenchmarkDockerWarm_NoOp for a dispatch with the egress
// proxy (a grant naming a host): its proxy, trust file and gateway sockets are made either
// way. "cold" is such a dispatch that spends its claimed slot and starts cold, "warm" a
// claimed slot, its trust store filled at the claim.
func BenchmarkDockerWarm_ProxyNoOp(b *testing.B) {
	e, w := dockerWarmEnvWith(b, 1, "boxcold")
	e.scriptSubagent("proxied", "commands: [\"sh -c *\"]\negress:\n  - api.test\n", `true`)
	req := func(target string) dispatch.Request {
		return dispatch.Request{Subagent: "proxied", Target: target, Timeout: 2 * time.Minute}
	}
	first := e.run(req("box"))
	wantFinished(b, first)
	if first.Network != dispatch.NetworkProxy {
		b.Fatalf("network %s, want proxy", first.Network)
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			wantFinished(b, e.run(req("boxcold")))
		}
	})
	b.Run("warm", func(b *testing.B) {
		claimed, cold := boxCounts(w).Claimed, boxCounts(w).Cold
		for b.Loop() {
			b.StopTimer()
			deadline := time.Now().Add(2 * time.Minute)
			for boxCounts(w).Ready < 1 {
				if time.Now().After(deadline) {
					b.Fatalf("no slot ready: %+v", boxCounts(w))
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.StartTimer()
			wantFinished(b, e.run(req("box")))
		}
		if c := boxCounts(w); c.Claimed-claimed != uint64(b.N) || c.Cold != cold {
			b.Fatalf("claimed %d of %d warm proxy dispatches, %d cold: %+v", c.Claimed-claimed, b.N, c.Cold-cold, c)
		}
	})
}
