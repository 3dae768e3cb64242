package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/netgw"
)

// BenchmarkRealPodClaimToWorker_PoolVsCold is a dispatch's start to its worker
// running it on a real node (kubelet, containerd, runc) with agent-sandbox's real controller,
// cold and through the pool interleaved, through the provider of a `backend: agent-sandbox`
// target:
//
//	AGORA_K8S_REAL_NODE=1 flock /work/realnode.lock go test ./internal/dispatch -run '^$' -bench 'RealPodClaimToWorker_PoolVsCold' -benchtime 5x -benchmem
//
// It measures:
//
//   - cold: Start (policy, Secret, Sandbox) to the worker container running (the init
//     container has fetched the mounts by then);
//   - pool: a pool pod made by the SandboxWarmPool ahead, enrolled with the kubelet's projected
//     token and its worker waiting on the gateway (not timed), then Pool.Claim (the pool's
//     check, the SandboxClaim, the controller's hand-over, the Sandbox's and pod's checks, the
//     export, the bind by pod uid) until the pod's worker took the grant, the same end point as
//     the slot benchmark's "warm". The worker then fetches the writable mounts itself (not
//     timed here; the whole dispatch counts it).
func BenchmarkRealPodClaimToWorker_PoolVsCold(b *testing.B) {
	n := startPodNodeWith(b, k8stest.Options{RealNode: true, AgentSandbox: true})
	docs, err := os.ReadFile("../../examples/kubernetes/rbac-pool.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, doc := range strings.Split(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+n.c.Namespace), "\n---\n") {
		if err := n.c.ApplyYAML(b.Context(), []byte(doc)); err != nil && !strings.Contains(err.Error(), "already exists") {
			b.Fatalf("apply examples/kubernetes/rbac-pool.yaml: %v", err)
		}
	}
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: n.c.Kubeconfig, Namespace: n.c.Namespace, Image: n.toolchain,
		WorkerImage: n.workerRef, GatewayURL: n.gatewayURL, GatewayCA: n.ca, Exporter: n.reg, Target: "pool", Backend: kubernetes.BackendAgentSandbox})
	if err != nil {
		b.Fatal(err)
	}
	const home = "benchhome"
	n.pods.set(kubernetes.PoolVerifier{P: p, Pools: p.MadePools, Home: home})
	slots := &netgw.Slots{Dir: n.slotsDir}
	places := []remote.SlotPlace{{Dst: "/agora/bundle"}}
	spec := func(id string) compute.Spec {
		bundle, out := b.TempDir(), b.TempDir()
		os.WriteFile(filepath.Join(bundle, "x"), []byte("x"), 0o644)
		return compute.Spec{ID: id, Argv: []string{"/agora/bin/agora-worker", "worker"},
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, Dir: "/agora/workspace",
			Binds:  []compute.Bind{{Src: bundle, Dst: "/agora/bundle"}, {Src: out, Dst: "/agora/out", Writable: true, Result: true}},
			Limits: compute.Limits{Timeout: 2 * time.Minute}}
	}
	pl, err := p.EnsurePool(b.Context(), spec("TEMPLATE"), kubernetes.PoolOptions{Home: home, Replicas: 1, Places: places})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pl.Delete(context.Background()) })
	lat := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		i++
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
		// The pool's pod, made ahead, enrolled, its worker given time to wait on the gateway.
		if !agoratest.Poll(3*time.Minute, func() bool { r, err := pl.Ready(b.Context()); return err == nil && r >= 1 }) {
			b.Fatalf("no pool pod ready in 3m\ngateway log:\n%s\ncontroller log:\n%s", n.gwLog, n.c.AgentSandboxLog())
		}
		// Outside the timer: a ready pod's worker then waits on its claim, as a pool's pods
		// wait in life; the gateway counts a claim's waiters in its own state only, which
		// the bench cannot read.
		time.Sleep(2 * time.Second)
		id = fmt.Sprintf("01BENCHPOOL%d%d", time.Now().UnixNano()%1e6, i)
		ctx, cancel = context.WithCancel(b.Context())
		b.StartTimer()
		begin = time.Now()
		ph, err := pl.Claim(ctx, spec(id), slots.BindPod)
		if err != nil {
			b.Fatalf("pool claim: %v\ngateway log:\n%s", err, n.gwLog)
		}
		lat["pool"] = append(lat["pool"], time.Since(begin))
		b.StopTimer()
		cancel()
		ph.Wait()
		b.StartTimer()
	}
	for name, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "ms-median-"+name)
		b.Logf("%s: %v", name, l)
	}
}
