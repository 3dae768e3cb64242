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

// The homes of the lease attacks, one each: a sweep deletes the lapsed pools of its home
// alone, and these tests run at once, so a home shared between two of them let one test's
// sweeper delete the other's pool once it lapsed, before the sweep that test waits on read it.
const (
	leaseSkewHome      = "k8sleaseskew"
	leaseNeighbourHome = "k8sleaseneighbour"
	leaseRenewHome     = "k8sleaseracerenew"
	leaseTwoHome       = "k8sleaseracetwo"
)

// leaseAttackLease is the lease of every holder and sweeper of these tests: seconds, not
// minutes, as the keeper's two minutes would make each test wait.
const leaseAttackLease = 10 * time.Second

// leaseSweeper is another holder of home (its own process, its own clock): a provider of p's
// settings with the attacks' lease, and its warmer, which keeps nothing.
func leaseSweeper(t *testing.T, p *Provider, home string) compute.PoolWarmer {
	t.Helper()
	_, w := leaseHolder(t, p, home, leaseAttackLease)
	return w
}

// leaseHolder is a holder of home in a process of its own: a provider of p's settings with
// lease, and its warmer.
func leaseHolder(t *testing.T, p *Provider, home string, lease time.Duration) (*Provider, compute.PoolWarmer) {
	t.Helper()
	hp, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	hp.testOnlyPoolLease = lease
	hp.testOnlyPodMeta = p.testOnlyPodMeta
	w, err := hp.PoolWarmer(compute.PoolOptions{Home: home, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	return hp, w
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
	hw, err := holder.PoolWarmer(compute.PoolOptions{Home: leaseSkewHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	sweeper := leaseSweeper(t, p, leaseSkewHome)
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
	live, err := p.PoolWarmer(compute.PoolOptions{Home: leaseNeighbourHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := p.PoolWarmer(compute.PoolOptions{Home: leaseNeighbourHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	sweeper := leaseSweeper(t, p, leaseNeighbourHome)
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

// Attack (races on a lapsed pool): a sweep that read a pool's template as lapsed and deletes
// it may meet, between its read and its delete, the pool's holder renewing it (its keeps had
// stalled for a lease and came back), or another holder's sweep deleting it first. The
// renewal keeps the pool (the delete names the resourceVersion it read); the other sweep's
// delete stands and this one's says nothing. A holder that keeps a pool a sweep just deleted
// makes it again, its warm pool and Secret owned by the template made again, not by the one
// deleted (whose owned objects the garbage collector is deleting meanwhile).
func TestAgentSandboxPool_AttackLeaseRaces(t *testing.T) {
	t.Parallel()
	_, p, admin, _ := poolSetup(t)
	ctx := t.Context()
	templates := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns)
	noneHeld := func(string) bool { return false }

	t.Run("renewal between read and delete", func(t *testing.T) {
		_, hw := leaseHolder(t, p, leaseRenewHome, leaseAttackLease)
		sp, sw := leaseHolder(t, p, leaseRenewHome, leaseAttackLease)
		var pool string
		cleanPools(t, admin, []compute.PoolWarmer{hw}, &pool)
		tmpl := poolSpec(t, "TEMPLATE", "lease-race-renew")
		if _, err := hw.Keep(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
		pool = hw.Held()
		before, err := templates.Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		renewed := false
		sp.testOnlyPoolLapsing = func(name string) {
			if name == pool && !renewed {
				renewed = true
				if _, err := hw.Keep(ctx, tmpl); err != nil {
					t.Errorf("the holder's renewal: %v", err)
				}
			}
		}
		agoratest.Eventually(t, time.Minute, "the sweep to read pool "+pool+" as lapsed", func() error {
			gone, err := sw.Sweep(ctx, noneHeld)
			if err != nil {
				t.Fatalf("the sweep: %v", err)
			}
			if slices.Contains(gone, pool) {
				t.Fatalf("the sweep deleted pool %s, which its holder renewed between the sweep's read and its delete", pool)
			}
			if !renewed {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		after, err := templates.Get(ctx, pool, metav1.GetOptions{})
		if err != nil || after.UID != before.UID || after.DeletionTimestamp != nil {
			t.Fatalf("pool %s's template after the renewal raced the sweep: %v; want the one made (uid %s), standing", pool, err, before.UID)
		}
	})

	t.Run("two sweeps, then a keep makes it again", func(t *testing.T) {
		_, hw := leaseHolder(t, p, leaseTwoHome, leaseAttackLease)
		// The two sweeps are DeleteLapsedPools alone: Warmer.Sweep's policy sweep would report
		// the pool too once its template is gone, whoever deleted it.
		p1, _ := leaseHolder(t, p, leaseTwoHome, leaseAttackLease)
		p2, _ := leaseHolder(t, p, leaseTwoHome, leaseAttackLease)
		s1 := func() ([]string, error) { return p1.DeleteLapsedPools(ctx, leaseTwoHome, noneHeld) }
		s2 := func() ([]string, error) { return p2.DeleteLapsedPools(ctx, leaseTwoHome, noneHeld) }
		var pool string
		cleanPools(t, admin, []compute.PoolWarmer{hw}, &pool)
		tmpl := poolSpec(t, "TEMPLATE", "lease-race-two")
		if _, err := hw.Keep(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
		pool = hw.Held()
		first, err := templates.Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raced := false
		p1.testOnlyPoolLapsing = func(name string) {
			if name != pool || raced {
				return
			}
			raced = true
			gone, err := s2()
			if err != nil || !slices.Contains(gone, pool) {
				t.Errorf("the other sweep, run between this one's read and its delete: deleted %v, %v; want pool %s", gone, err, pool)
			}
		}
		// The other sweep starts its watch first: when this one reads the pool as lapsed, so
		// does the other, run from the hook.
		for _, sweep := range []func() ([]string, error){s2, s1} {
			if gone, err := sweep(); err != nil || slices.Contains(gone, pool) {
				t.Fatalf("a first sweep: deleted %v, %v; want nothing", gone, err)
			}
		}
		agoratest.Eventually(t, time.Minute, "both sweeps to read pool "+pool+" as lapsed", func() error {
			gone, err := s1()
			if err != nil {
				t.Fatalf("the sweep that lost the race: %v", err)
			}
			if raced && slices.Contains(gone, pool) {
				t.Fatalf("both sweeps say they deleted pool %s", pool)
			}
			if !raced {
				return fmt.Errorf("not yet")
			}
			return nil
		})

		// Its holder keeps it again at once, while the garbage collector deletes what the
		// deleted template owned.
		agoratest.Eventually(t, time.Minute, "pool "+pool+" made again, its warm pool and Secret the new template's", func() error {
			if _, err := hw.Keep(ctx, tmpl); err != nil {
				return fmt.Errorf("keep: %w", err)
			}
			tm, err := templates.Get(ctx, pool, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if tm.UID == first.UID {
				t.Fatalf("pool %s's template is the one the sweep deleted", pool)
			}
			wp, err := admin.client.ExtensionsV1beta1().SandboxWarmPools(p.ns).Get(ctx, pool, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("warm pool: %w", err)
			}
			sec, err := admin.client.CoreV1().Secrets(p.ns).Get(ctx, pool, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("secret: %w", err)
			}
			for what, refs := range map[string][]metav1.OwnerReference{"warm pool": wp.OwnerReferences, "secret": sec.OwnerReferences} {
				if len(refs) != 1 || refs[0].UID != tm.UID {
					return fmt.Errorf("its %s is owned by %v, want the template %s", what, refs, tm.UID)
				}
			}
			return nil
		})
	})
}
