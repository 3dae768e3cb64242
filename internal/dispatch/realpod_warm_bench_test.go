package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// BenchmarkRealPodClaimToWorker_WarmVsCold is a dispatch's start to its worker running it
// on a real node (kubelet, containerd, runc), cold and warm interleaved, through the provider:
//
//	go test ./internal/dispatch -run '^$' -bench 'RealPodClaimToWorker' -benchtime 5x -benchmem
//
// It measures:
//
//   - cold: Start (policy, Secret, Job) to the worker container running (the init container has
//     fetched the mounts by then);
//   - warm: a slot pod started ahead and its worker waiting on the gateway (not timed), then
//     Slot.Run (the check of Job and pod, the export, the bind, the claimed mark) until the
//     pod's worker took the grant. The worker then fetches the writable mounts itself (not
//     timed here; the whole-dispatch benchmark counts it);
//   - warm-filled: the same start until the slot's filler has filled the read-only places with
//     the grant the worker handed it, and ended.
func BenchmarkRealPodClaimToWorker_WarmVsCold(b *testing.B) {
	benchRealPodClaim(b, false)
}

// BenchmarkRealPodClaimToWorker_ProxyWarmVsCold is the same for a dispatch with the egress
// proxy's trust (its trust directory, its trust file over the system store), which runs warm:
//
//	go test ./internal/dispatch -run '^$' -bench 'RealPodClaimToWorker_Proxy' -benchtime 5x -benchmem
func BenchmarkRealPodClaimToWorker_ProxyWarmVsCold(b *testing.B) {
	benchRealPodClaim(b, true)
}

func benchRealPodClaim(b *testing.B, proxy bool) {
	n := startPodNode(b)
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: n.c.Kubeconfig, Namespace: n.c.Namespace,
		Image: n.toolchain, WorkerImage: n.workerRef, GatewayURL: n.gatewayURL, GatewayCA: n.ca, Exporter: n.reg, Target: "pod"})
	if err != nil {
		b.Fatal(err)
	}
	slots := &netgw.Slots{Dir: n.slotsDir}
	places := []remote.SlotPlace{{Dst: "/agora/bundle"}}
	if proxy {
		places = append(places, remote.SlotPlace{Dst: wire.TrustPath}, remote.SlotPlace{Dst: wire.SystemTrustFile, File: true})
	}
	spec := func(id string) compute.Spec {
		bundle, out, trust := b.TempDir(), b.TempDir(), b.TempDir()
		os.WriteFile(filepath.Join(bundle, "x"), []byte("x"), 0o644)
		s := compute.Spec{ID: id, Argv: []string{"/agora/bin/agora-worker", "worker"},
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, Dir: "/agora/workspace",
			Binds:  []compute.Bind{{Src: bundle, Dst: "/agora/bundle"}, {Src: out, Dst: "/agora/out", Writable: true, Result: true}},
			Limits: compute.Limits{Timeout: 2 * time.Minute}}
		if proxy {
			file := filepath.Join(trust, wire.TrustFile)
			os.WriteFile(file, []byte(n.ca), 0o644)
			s.Binds = append(s.Binds, compute.Bind{Src: trust, Dst: wire.TrustPath}, compute.Bind{Src: file, Dst: wire.SystemTrustFile})
		}
		return s
	}
	lat := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		i++
		// cold
		id := fmt.Sprintf("01BENCHCOLD%d%d", time.Now().UnixNano()%1e6, i)
		ctx, cancel := context.WithCancel(b.Context())
		begin := time.Now()
		h, err := p.Start(ctx, spec(id))
		if err != nil {
			b.Fatal(err)
		}
		waitWorkerStarted(b, n, id)
		lat["cold"] = append(lat["cold"], time.Since(begin))
		b.StopTimer()
		cancel()
		h.Wait()
		// warm: the slot, started ahead and its worker given time to wait on the gateway.
		gs, err := slots.Create(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		sl, err := p.StartSlot(b.Context(), spec("TEMPLATE"), kubernetes.SlotOptions{ID: gs.ID, Token: gs.Token, Home: "benchhome", Places: places})
		if err != nil {
			b.Fatal(err)
		}
		// Outside the timer: the slot's worker then waits on its claim, as a slot waits in
		// life; the gateway counts a claim's waiters in its own state only, which the bench
		// cannot read.
		time.Sleep(2 * time.Second)
		id = fmt.Sprintf("01BENCHWARM%d%d", time.Now().UnixNano()%1e6, i)
		ctx, cancel = context.WithCancel(b.Context())
		b.StartTimer()
		begin = time.Now()
		wh, err := sl.Run(ctx, spec(id), gs.Bind)
		if err != nil {
			b.Fatal(err)
		}
		lat["warm"] = append(lat["warm"], time.Since(begin))
		waitFillerEnded(b, n, gs.ID)
		lat["warm-filled"] = append(lat["warm-filled"], time.Since(begin))
		b.StopTimer()
		cancel()
		wh.Wait()
		gs.Close()
		b.StartTimer()
	}
	for name, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "ms-median-"+name)
		b.Logf("%s: %v", name, l)
	}
}

// waitFillerEnded polls slot's pod until its filler container ended, having filled the
// places; a filler that failed fails the benchmark.
func waitFillerEnded(b *testing.B, n *podNode, slot string) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var l corev1.PodList
		if err := n.c.Do(b.Context(), "GET", "/api/v1/namespaces/"+n.c.Namespace+"/pods?labelSelector=agora.slot%3D"+slot, nil, &l); err != nil {
			b.Fatal(err)
		}
		for _, pod := range l.Items {
			for _, cs := range pod.Status.ContainerStatuses {
				if t := cs.State.Terminated; cs.Name == "fill" && t != nil {
					if t.ExitCode != 0 {
						b.Fatalf("slot %s: its filler exited %d", slot, t.ExitCode)
					}
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("slot %s: its filler did not end in 3m", slot)
}

// waitWorkerStarted polls the dispatch's pod until its worker container has started.
func waitWorkerStarted(b *testing.B, n *podNode, id string) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var l corev1.PodList
		if err := n.c.Do(b.Context(), "GET", "/api/v1/namespaces/"+n.c.Namespace+"/pods?labelSelector=agora.dispatch%3D"+id, nil, &l); err != nil {
			b.Fatal(err)
		}
		for _, pod := range l.Items {
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == "worker" && (cs.State.Running != nil || cs.State.Terminated != nil) {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("dispatch %s: its worker did not start in 3m", id)
}

// BenchmarkDispatch_RealPodWarmVsCold is one whole dispatch, Accept to the recorded
// result, of the same task on the real node: on target "pod" (warm: 1, a slot claimed each
// time; the wait for the pool's refill is not timed) and on "podcold" (the same settings,
// warm: 0), interleaved. The warm one includes what the slot's worker does after the claim
// (fetching the bundle and workspace over the gateway), which the cold pod's init container
// does before its worker runs.
//
//	go test ./internal/dispatch -run '^$' -bench 'Dispatch_RealPodWarmVsCold' -benchtime 5x -benchmem
func BenchmarkDispatch_RealPodWarmVsCold(b *testing.B) {
	e, w, _ := podWarmEnv(b, 1)
	tg := e.home.Config.Targets["pod"]
	tg.Warm = 0
	e.home.Config.Targets["podcold"] = tg
	e.subagent("editor", realPodEdit)
	repo := gitRepo(b, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
	req := func(target string) dispatch.Request {
		return dispatch.Request{Subagent: "editor", Repo: repo, Target: target, Timeout: 4 * time.Minute}
	}
	wantFinished(b, e.run(req("pod"))) // teaches the pool its shape
	lat := map[string][]time.Duration{}
	for b.Loop() {
		begin := time.Now()
		wantFinished(b, e.run(req("podcold")))
		lat["cold"] = append(lat["cold"], time.Since(begin))
		b.StopTimer()
		deadline := time.Now().Add(3 * time.Minute)
		for podCounts(w).Ready < 1 {
			if time.Now().After(deadline) {
				b.Fatalf("kubernetes warm slots: %+v, want 1 ready", podCounts(w))
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.StartTimer()
		begin = time.Now()
		wantFinished(b, e.run(req("pod")))
		lat["warm"] = append(lat["warm"], time.Since(begin))
	}
	if c := podCounts(w); c.Cold != 0 {
		b.Errorf("counts %+v: a warm dispatch started cold", c)
	}
	for name, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "ms-median-"+name)
		b.Logf("%s: %v", name, l)
	}
}
