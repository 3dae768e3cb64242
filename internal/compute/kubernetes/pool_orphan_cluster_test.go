package kubernetes

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// Attack (kill -9 of the holder): a holder keeps the pool of template a and is killed with -9,
// so nothing deletes that pool at its close. The next holder of the home, under the same
// identity, is taught another shape (a cold dispatch of another shape, or the target changed in
// agora.yaml) and keeps the pool of b. Pool a's pods can never be claimed again (its name
// hashes a's shape and the target's settings), yet its warm pods run on: the next holder's Keep
// deletes only a pool it made itself, and its Sweep deletes only the policies of pools nothing
// stands for and never a pool of the home's current identity (another holder may hold it).
//
// This pins what must hold: a pool that no holder keeps is deleted by the holders' sweep. It
// fails while the leak is open.
func TestAgentSandboxPool_AttackKill9HolderOrphansPool(t *testing.T) {
	t.Parallel()
	_, p, admin, _ := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	killed, err := p.PoolWarmer(compute.PoolOptions{Home: testHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := killed.Keep(t.Context(), poolSpec(t, "TEMPLATE", "orphan-a")); err != nil {
		t.Fatal(err)
	}
	poolA := killed.Held()
	// killed is never closed: its holder died with -9.
	next, err := p.PoolWarmer(compute.PoolOptions{Home: testHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := next.Keep(t.Context(), poolSpec(t, "TEMPLATE", "orphan-b")); err != nil {
		t.Fatal(err)
	}
	poolB := next.Held()
	t.Cleanup(func() {
		next.Close(context.Background())
		killed.Close(context.Background())
		for _, name := range []string{poolA, poolB} {
			if np, err := p.findPolicy(context.Background(), name); err == nil && np != nil {
				p.deletePolicy(name, np.UID)
			}
			p.deleteGuard(context.Background(), name)
		}
	})
	held := func(pool string) bool { return pool == poolB }
	if _, err := next.Sweep(t.Context(), held); err != nil {
		t.Fatalf("the next holder's sweep: %v", err)
	}
	waitGone(t, "orphaned pool's template", func() error {
		_, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(t.Context(), poolA, metav1.GetOptions{})
		if err == nil {
			// Another sweep, as the keeper runs every 15 s, before the next look.
			next.Sweep(t.Context(), held)
		}
		return err
	})
}
