package kubernetes

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on the pool through the compute seam's PoolWarmer (kubernetes.Warmer), on the real
// control plane with agent-sandbox's real controller: the target's template drifting between
// Keep and Claim, and Close racing a claim.
//
// The holder keeps the pool of template a; the target's template changes to b (a cold
// dispatch taught another shape) and Keep makes b's pool and deletes a's, whose pods would
// never be claimed again. A dispatch of a's shape then finds no pool and is refused before any
// SandboxClaim is made (it starts cold); one of b's shape runs in b's pod. Close, racing a
// second claim of b, either leaves that claim's pod running its dispatch (the claim's now, not
// the pool's) or refuses the claim and deletes it: never a claim left behind, never a pod
// handed two dispatches. Without Keep's delete of the old pool a's pool stays and this fails.
func TestAgentSandboxPool_AttackWarmerDriftAndCloseRace(t *testing.T) {
	t.Parallel()
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	p.opts.BindPod = g.slots.BindPod
	pw, err := p.PoolWarmer(compute.PoolOptions{Home: testHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Keep(t.Context(), poolSpec(t, "TEMPLATE", "warmer-a")); err != nil {
		t.Fatalf("Keep of template a: %v", err)
	}
	poolA := pw.Held()
	if _, err := pw.Keep(t.Context(), poolSpec(t, "TEMPLATE", "warmer-b")); err != nil {
		t.Fatalf("Keep of template b: %v", err)
	}
	poolB := pw.Held()
	t.Cleanup(func() {
		pw.Close(context.Background())
		for _, name := range []string{poolA, poolB} {
			if np, err := p.findPolicy(context.Background(), name); err == nil && np != nil {
				p.deletePolicy(name, np.UID)
			}
			p.deleteGuard(context.Background(), name)
		}
	})
	if poolA == poolB || poolA == "" {
		t.Fatalf("Keep held %q for a, then %q for b: want two pools", poolA, poolB)
	}
	waitGone(t, "drifted pool a's template", func() error {
		_, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(t.Context(), poolA, metav1.GetOptions{})
		return err
	})
	idA := clusterID("WARMERA")
	if h, err := pw.Claim(t.Context(), poolSpec(t, idA, "warmer-a")); err == nil {
		p.Cancel(context.Background(), h.TaskID())
		t.Fatal("a dispatch of the drifted template's shape claimed from its pool")
	}
	if _, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(idA), metav1.GetOptions{}); err == nil {
		t.Errorf("a SandboxClaim was made for the drifted template's dispatch %s", idA)
	}

	pods := enrolPods(t, g, cs, readyPoolPods(t, admin, poolB, 1, nil))
	idB := clusterID("WARMERB")
	var h compute.Handle
	var claimErr, closeErr error
	var wg sync.WaitGroup
	wg.Go(func() { h, claimErr = pw.Claim(t.Context(), poolSpec(t, idB, "warmer-b")) })
	wg.Go(func() { closeErr = pw.Close(t.Context()) })
	wg.Wait()
	if closeErr != nil {
		t.Errorf("Close: %v", closeErr)
	}
	if held := pw.Held(); held != "" {
		t.Errorf("Held after Close = %q, want none", held)
	}
	if claimErr != nil {
		t.Logf("the claim that raced Close was refused: %v", claimErr)
		waitGone(t, "refused claim", func() error {
			_, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(idB), metav1.GetOptions{})
			return err
		})
		return
	}
	t.Cleanup(func() { p.Cancel(context.Background(), h.TaskID()) })
	got := handedTo(t, pods, idB)
	// The pool is gone; the claimed pod runs on, its Sandbox the claim's.
	sb, err := admin.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), got.pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claimed pod's Sandbox after Close: %v", err)
	}
	if ref, ok := controllerRef(sb.OwnerReferences); !ok || ref.Kind != "SandboxClaim" || sb.DeletionTimestamp != nil {
		t.Errorf("the claimed Sandbox after Close is controlled by %+v (deleting %v), want its claim", ref, sb.DeletionTimestamp != nil)
	}
	if err := p.Cancel(t.Context(), h.TaskID()); err != nil {
		t.Fatal(err)
	}
	if exit := waitTimeout(t, h, 3*time.Minute); !exit.Cancelled {
		t.Errorf("the claimed dispatch after Close, cancelled: %+v", exit)
	}
}
