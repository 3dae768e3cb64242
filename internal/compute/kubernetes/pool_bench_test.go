package kubernetes

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// BenchmarkKwokPoolClaimToWorker_WarmVsCold is a dispatch's start to its worker holding
// it, cold (a Sandbox of its own) and through agent-sandbox's warm pool, interleaved on one
// control plane with the real agent-sandbox controller and a real network gateway:
//
//	go test ./internal/compute/kubernetes -run '^$' -bench 'KwokPoolClaimToWorker' -benchtime 10x -benchmem
//
// It measures:
//
//   - cold: the provider's Start (policy, Secret, Sandbox) to the Sandbox's pod Running on kwok
//     (kwok runs no process: Running is its stage, with no image pull and no init container);
//   - pool: a pool pod that runs and enrolled (with a token the apiserver minted bound to it, as
//     the kubelet's), its worker waiting at the gateway (not timed, as the pool does ahead),
//     then [Pool.Claim] (the pool's check, the SandboxClaim, the controller's hand-over, the
//     Sandbox's and pod's checks, the export, the bind by uid) to that worker holding the grant.
func BenchmarkKwokPoolClaimToWorker_WarmVsCold(b *testing.B) {
	g, p, admin, cs := poolSetup(b)
	p.testOnlyPodMeta = failWith(0, "1h")
	pl, err := p.EnsurePool(b.Context(), poolSpec(b, "TEMPLATE", "bench"), PoolOptions{Home: testHome, Replicas: 2, Places: warmPlaces})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pl.Delete(context.Background()) })
	lat := map[string][]time.Duration{}
	used := map[string]bool{}
	all := map[string]*poolPod{}
	for b.Loop() {
		// cold
		id := clusterID("BPC")
		begin := time.Now()
		h, err := p.Start(b.Context(), poolSpec(b, id, "bench"))
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
		// pool: its pods enrolled and waiting, outside the timing.
		if _, err := pl.Refresh(b.Context()); err != nil {
			b.Fatal(err)
		}
		pods := armPool(b, g, cs, admin, pl.Name, 2, used, all)
		id = clusterID("BPW")
		spec := poolSpec(b, id, "bench")
		for _, pp := range pods { // every pod's worker waits on its claim
			agoratest.WaitFor(b, time.Minute, "pod "+pp.pod.Name+"'s claim to wait at the gateway", func() bool { return g.srv.ClaimsWaiting(pp.slot.Slot) == 1 })
		}
		b.StartTimer()
		begin = time.Now()
		wh, err := pl.Claim(b.Context(), spec, g.slots.BindPod)
		if err != nil {
			b.Fatal(err)
		}
		pp := handedTo(b, pods, id)
		lat["pool"] = append(lat["pool"], time.Since(begin))
		b.StopTimer()
		used[string(pp.pod.UID)] = true
		for _, o := range pods {
			o.claim()
			if o != pp {
				<-o.got
			}
		}
		p.Cancel(b.Context(), wh.TaskID())
		wh.Wait()
		b.StartTimer()
	}
	for name, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "ms-median-"+name)
	}
}
