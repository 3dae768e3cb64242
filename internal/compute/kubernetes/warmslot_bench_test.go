package kubernetes

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// BenchmarkKwokClaimToWorker_WarmVsCold is a dispatch's start to its worker running it,
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
		agoratest.WaitFor(b, time.Minute, "the slot's claim to wait at the gateway", func() bool { return g.srv.ClaimsWaiting(sl.ID) == 1 })
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

// BenchmarkKwokClaimToWorker_ProxyWarmVsCold is the same for a dispatch with the
// egress proxy (its trust directory and its trust file over the system store), run warm:
//
//	go test ./internal/compute/kubernetes -run '^$' -bench 'KwokClaimToWorker_Proxy' -benchtime 20x -benchmem
//
// cold is as above; warm is [Slot.Run] to the slot's worker holding the grant and the slot's
// filler (played by the benchmark, as kwok runs no process) having fetched every read-only
// place (bundle, trust directory, trust file) with it: what the filler does before the worker
// goes on.
func BenchmarkKwokClaimToWorker_ProxyWarmVsCold(b *testing.B) {
	g := startSlotGW(b)
	p := slotProvider(b, g)
	places := append(warmPlaces[:1:1], remote.SlotPlace{Dst: "/agora/trust"}, remote.SlotPlace{Dst: systemTrust, File: true})
	lat := map[string][]time.Duration{}
	for b.Loop() {
		id := clusterID("BPC")
		begin := time.Now()
		h, err := p.Start(b.Context(), proxySpec(b, id, "ca\n"))
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
		gs, err := g.slots.Create(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		sl, err := p.StartSlot(b.Context(), proxySpec(b, "TEMPLATE", "template\n"), SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: places})
		if err != nil {
			b.Fatal(err)
		}
		token := podToken(b, p, sl)
		ctx, cancel := context.WithCancel(b.Context())
		id = clusterID("BPW")
		got := claimAndFill(ctx, g, sl.ID, token, b.TempDir())
		agoratest.WaitFor(b, time.Minute, "the slot's claim to wait at the gateway", func() bool { return g.srv.ClaimsWaiting(sl.ID) == 1 })
		b.StartTimer()
		begin = time.Now()
		wh, err := sl.Run(ctx, proxySpec(b, id, "ca\n"), gs.Bind)
		if err != nil {
			b.Fatal(err)
		}
		if err := <-got; err != nil {
			b.Fatal(err)
		}
		lat["warm"] = append(lat["warm"], time.Since(begin))
		b.StopTimer()
		cancel()
		wh.Wait()
		sl.Discard()
		gs.Close()
		b.StartTimer()
	}
	for name, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "ms-median-"+name)
	}
}

// claimAndFill plays a slot's worker and filler: it claims with the slot's token, then fetches
// every read-only mount of the granted dispatch below dir.
func claimAndFill(ctx context.Context, g *slotGW, id, token, dir string) <-chan error {
	done := make(chan error, 1)
	go func() {
		c, err := workerremote.Claim(ctx, g.url, id, token, g.ca, nil)
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		info, err := c.Info(ctx)
		if err != nil {
			done <- err
			return
		}
		for _, m := range info.Mounts {
			if remote.ReadOnlyMount(m) && m.Fetch {
				if err := c.Fetch(ctx, m, filepath.Join(dir, m.Name)); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	return done
}
