package kubernetes

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkKwokClaimToWorker_WarmVsCold (#30) is a dispatch's start to its worker running it,
// cold and warm, interleaved in the same control plane, against a real network gateway:
//
//	go test ./internal/compute/kubernetes -run '^$' -bench 'KwokClaimToWorker' -benchtime 20x -benchmem
//
// It measures:
//
//   - cold: the provider's Start (policy, Secret, Job) to the pod Running on kwok (kwok runs no
//     process: Running is its stage, with no image pull and no init container);
//   - warm: a slot started ahead (not timed), then [Slot.Run] (the check of Job and pod, the
//     export, the bind, the claimed mark) to the slot's worker (the benchmark, with the token
//     from the slot's Secret) holding the grant: the dispatch is its from there.
func BenchmarkKwokClaimToWorker_WarmVsCold(b *testing.B) {
	g := startSlotGW(b)
	p := slotProvider(b, g)
	lat := map[string][]time.Duration{}
	for b.Loop() {
		// cold
		id := clusterID("BC")
		spec := warmSpec(b, id)
		begin := time.Now()
		h, err := p.Start(b.Context(), spec)
		if err != nil {
			b.Fatal(err)
		}
		waitRunning(b, p, id)
		lat["cold"] = append(lat["cold"], time.Since(begin))
		b.StopTimer()
		if err := p.Cancel(b.Context(), h.TaskID()); err != nil {
			b.Fatal(err)
		}
		h.Wait()
		// warm: the slot is started outside the timing, as the pool does ahead.
		sl, gs := startSlot(b, p, g)
		token := podToken(b, p, sl)
		ctx, cancel := context.WithCancel(b.Context())
		id = clusterID("BW")
		spec = warmSpec(b, id)
		// The slot's worker waits on the gateway before any dispatch comes, as a pod's does.
		got := workerClaims(ctx, g, sl.ID, token)
		time.Sleep(300 * time.Millisecond)
		b.StartTimer()
		begin = time.Now()
		wh, err := sl.Run(ctx, spec, gs.Bind)
		if err != nil {
			b.Fatal(err)
		}
		if d := <-got; d != id {
			b.Fatalf("worker handed %q", d)
		}
		lat["warm"] = append(lat["warm"], time.Since(begin))
		b.StopTimer()
		cancel()
		wh.Wait()
		b.StartTimer()
	}
	for name, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "ms-median-"+name)
	}
}
