package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// leaseAttackHome is the home of the lease attacks: their sweeps delete lapsed pools of their
// home alone, never another test's in the shared namespace.
const leaseAttackHome = "k8sleaseattackhome"

// leaseAttackLease is the lease of every holder and sweeper of these tests: seconds, not
// minutes, as the keeper's two minutes would make each test wait.
const leaseAttackLease = 10 * time.Second

// leaseSweeper is another holder of leaseAttackHome (its own process, its own clock): a
// provider of p's settings with p's lease, and its warmer, which keeps nothing.
func leaseSweeper(t *testing.T, p *Provider) compute.PoolWarmer {
	t.Helper()
	sp, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	sp.testOnlyPoolLease = leaseAttackLease
	w, err := sp.PoolWarmer(compute.PoolOptions{Home: leaseAttackHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// cleanPools deletes what the named pools left, at the test's end.
func cleanPools(t *testing.T, p *Provider, ws []compute.PoolWarmer, names ...*string) {
	t.Cleanup(func() {
		for _, w := range ws {
			w.Close(context.Background())
		}
		for _, name := range names {
			if *name == "" {
				continue
			}
			p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Delete(context.Background(), *name, metav1.DeleteOptions{})
			if np, err := p.findPolicy(context.Background(), *name); err == nil && np != nil {
				p.deletePolicy(*name, np.UID)
			}
			p.deleteGuard(context.Background(), *name)
		}
	})
}

// Attack (clock skew): a live holder whose clock runs a minute behind the sweeper's (more than
// a lease) writes leases the sweeper reads as passed the moment they are written. A sweep that
// compares the stamp with its own clock deletes the live holder's pool at every sweep, and its
// claims start cold. Client-go's leader election compares no clocks: a candidate takes the
// lease only once it has itself seen the record unchanged for a whole lease on its own clock.
// A sweep that does the same never deletes a pool whose holder renews it, however far apart
// their clocks are.
//
// There is no clock seam on the holder: its skew is its lease, which the holder writes as its
// now plus its lease. A holder a minute behind writes the sweeper's now plus (lease less a
// minute), which is what testOnlyPoolLease makes it write.
func TestAgentSandboxPool_AttackClockSkewDeletesLiveHoldersPool(t *testing.T) {
	t.Parallel()
	_, p, _, _ := poolSetup(t)
	ctx := t.Context()
	const skew = time.Minute
	holder, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	holder.testOnlyPoolLease = leaseAttackLease - skew
	hw, err := holder.PoolWarmer(compute.PoolOptions{Home: leaseAttackHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	sweeper := leaseSweeper(t, p)
	var pool string
	cleanPools(t, p, []compute.PoolWarmer{hw}, &pool)
	tmpl := poolSpec(t, "TEMPLATE", "lease-skew")
	if _, err := hw.Keep(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	pool = hw.Held()
	start := time.Now()
	agoratest.Eventually(t, 3*time.Minute, "three of the sweeper's leases to pass while the skewed holder keeps its pool", func() error {
		gone, err := sweeper.Sweep(ctx, func(string) bool { return false })
		if err != nil {
			t.Fatalf("the sweeper's sweep: %v", err)
		}
		if slices.Contains(gone, pool) {
			t.Fatalf("the sweeper deleted pool %s, which a live holder whose clock runs %s behind keeps", pool, skew)
		}
		if _, err := hw.Keep(ctx, tmpl); err != nil {
			t.Fatalf("the holder's keep: %v", err)
		}
		if time.Since(start) < 3*leaseAttackLease {
			return fmt.Errorf("%s of the sweeper's sweeps", time.Since(start).Round(time.Second))
		}
		return nil
	})
}

// Attack (a neighbour with patch rights on SandboxTemplates: any other tenant of the
// namespace the Role's patch is granted to): it writes agora.dev/held-until on the templates
// it finds. On a live holder's template it backdates the lease, or writes what is no instant
// (not RFC 3339, a huge year, a negative number), each just before another holder sweeps: that
// sweep must not delete the pool its holder keeps. On a dead holder's pool (kept once, never
// again) it writes a lease a thousand years on: the pool's warm pods must not run for ever, so
// a sweep deletes it once no holder renews it, whatever the stamp says.
func TestAgentSandboxPool_AttackNeighbourWritesLease(t *testing.T) {
	t.Parallel()
	_, p, admin, _ := poolSetup(t)
	ctx := t.Context()
	live, err := p.PoolWarmer(compute.PoolOptions{Home: leaseAttackHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := p.PoolWarmer(compute.PoolOptions{Home: leaseAttackHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	sweeper := leaseSweeper(t, p)
	var livePool, deadPool string
	cleanPools(t, admin, []compute.PoolWarmer{live}, &livePool, &deadPool)
	tmplLive, tmplDead := poolSpec(t, "TEMPLATE", "lease-neighbour-live"), poolSpec(t, "TEMPLATE", "lease-neighbour-dead")
	if _, err := live.Keep(ctx, tmplLive); err != nil {
		t.Fatal(err)
	}
	livePool = live.Held()
	if _, err := dead.Keep(ctx, tmplDead); err != nil {
		t.Fatal(err)
	}
	deadPool = dead.Held()
	neighbour := func(pool, value string) {
		t.Helper()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotationHeldUntil, value)
		if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(ctx, pool, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("the neighbour's patch of pool %s: %v", pool, err)
		}
	}
	neighbour(deadPool, "3026-01-01T00:00:00Z")
	bad := []string{"2000-01-01T00:00:00Z", "not an instant", "99999999-12-31T23:59:59Z", "-1", "", "1970-01-01T00:00:00+14:00"}
	start := time.Now()
	for i := 0; ; i++ {
		neighbour(livePool, bad[i%len(bad)])
		gone, err := sweeper.Sweep(ctx, func(string) bool { return false })
		if err != nil {
			t.Fatalf("the sweeper's sweep: %v", err)
		}
		if slices.Contains(gone, livePool) {
			t.Fatalf("the sweeper deleted pool %s, which a live holder keeps, after the neighbour wrote %q on it", livePool, bad[i%len(bad)])
		}
		if _, err := live.Keep(ctx, tmplLive); err != nil {
			t.Fatalf("the live holder's keep: %v", err)
		}
		_, err = admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, deadPool, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && time.Since(start) > 2*leaseAttackLease {
			break
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("the dead holder's pool %s, its lease written a thousand years on by a neighbour, still stands after %s of sweeps: %v",
				deadPool, time.Since(start).Round(time.Second), err)
		}
	}
	if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, livePool, metav1.GetOptions{}); err != nil {
		t.Errorf("the live holder's pool %s after the neighbour's writes: %v", livePool, err)
	}
}
