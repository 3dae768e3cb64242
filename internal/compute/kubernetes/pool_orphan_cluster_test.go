package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/netgw"
)

// orphanTestHome is the home of the lease tests: its sweeps delete lapsed pools of their home
// alone, never another test's of testHome in the shared namespace.
const orphanTestHome = "k8sorphantesthome"

// Attack (kill -9 of the holder): a holder keeps the pool of template a and is killed with -9,
// so nothing deletes that pool at its close. The next holder of the home, under the same
// identity, is taught another shape (a cold dispatch of another shape, or the target changed in
// agora.yaml) and keeps the pool of b. Pool a's pods can never be claimed again (its name
// hashes a's shape and the target's settings); its holder's lease of it lapses, and the next
// holder's sweep deletes it, its warm pods with it, and then its policy.
//
// While the holder of a lives (another process, renewing its lease at each keep, and sweeping
// as a holder does), neither holder deletes the other's pool, for longer than a lease: the
// leases, not luck, keep them.
func TestAgentSandboxPool_AttackKill9HolderOrphansPool(t *testing.T) {
	t.Parallel()
	g, p, admin, _ := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	const lease = 20 * time.Second
	p.testOnlyPoolLease = lease // the next holder's sweeps watch a lease as long as the holder's
	ctx := t.Context()
	cmd, poolA := startHolder(t, poolHolder{Opts: claimerOptsOf(p), Sessions: g.reg.Dir, Spec: poolSpec(t, "TEMPLATE", "orphan-a"),
		Home: orphanTestHome, Lease: lease, Every: time.Second, PodEnd: "1h"})
	next, err := p.PoolWarmer(compute.PoolOptions{Home: orphanTestHome, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	tmplB := poolSpec(t, "TEMPLATE", "orphan-b")
	if _, err := next.Keep(ctx, tmplB); err != nil {
		t.Fatal(err)
	}
	poolB := next.Held()
	t.Cleanup(func() {
		next.Close(context.Background())
		for _, name := range []string{poolA, poolB} {
			if np, err := p.findPolicy(context.Background(), name); err == nil && np != nil {
				p.deletePolicy(name, np.UID)
			}
			p.deleteGuard(context.Background(), name)
		}
	})
	if poolA == poolB {
		t.Fatalf("both holders keep pool %s: want a pool per shape", poolA)
	}
	readyPoolPods(t, admin, poolA, 1, nil)
	held := func(pool string) bool { return pool == poolB }
	template := func(name string) (*templateObject, error) {
		return admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, name, metav1.GetOptions{})
	}

	// Both live: the first lease of pool a passes, and the next holder watches it for two
	// leases, while the next holder keeps b and sweeps.
	t0, err := template(poolA)
	if err != nil {
		t.Fatal(err)
	}
	first, err := time.Parse(time.RFC3339, t0.Annotations[annotationHeldUntil])
	if err != nil {
		t.Fatalf("pool %s's template carries no lease: %v", poolA, err)
	}
	start := time.Now()
	agoratest.Eventually(t, 2*time.Minute, "pool a's first lease to pass while its holder lives", func() error {
		if _, err := next.Keep(ctx, tmplB); err != nil {
			t.Fatalf("the next holder's keep: %v", err)
		}
		gone, err := next.Sweep(ctx, held)
		if err != nil {
			t.Fatalf("the next holder's sweep: %v", err)
		}
		if slices.Contains(gone, poolA) {
			t.Fatalf("the next holder's sweep deleted pool %s, which a live holder keeps", poolA)
		}
		for _, name := range []string{poolA, poolB} {
			if tm, err := template(name); err != nil || tm.DeletionTimestamp != nil {
				t.Fatalf("pool %s's template while both holders live: %v", name, err)
			}
		}
		if !time.Now().After(first.Add(time.Second)) || time.Since(start) < 2*lease {
			return fmt.Errorf("its first lease lapses at %v; %s of sweeps", first, time.Since(start).Round(time.Second))
		}
		return nil
	})

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	agoratest.Eventually(t, 2*time.Minute, "the killed holder's pool deleted by the next holder's sweep", func() error {
		if _, err := next.Sweep(ctx, held); err != nil {
			return err
		}
		if _, err := template(poolA); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pool %s's template: %v", poolA, err)
		}
		return nil
	})
	waitPoolParts(t, admin, poolA, 0)
	agoratest.Eventually(t, time.Minute, "the killed holder's pool's policy swept", func() error {
		gone, err := next.Sweep(ctx, held)
		if err != nil {
			return err
		}
		if slices.Contains(gone, poolA) {
			return nil
		}
		// A sweep of the wait above takes the policy as soon as nothing stands for it, which
		// can be before the template reads as gone: then no later sweep names it again.
		// The policy is looked up as agora does (a list: its Role may list policies, not get
		// one).
		np, err := p.findPolicy(ctx, poolA)
		if err == nil && (np == nil || np.DeletionTimestamp != nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("swept %v; pool %s's policy: %w", gone, poolA, err)
		}
		return fmt.Errorf("swept %v; pool %s's policy stands", gone, poolA)
	})
	if _, err := template(poolB); err != nil {
		t.Errorf("the next holder's own pool %s after the sweeps: %v", poolB, err)
	}
}

// poolHolderEnv makes the test binary a holder of a pool that keeps it until it is killed with
// -9 (pool_orphan_cluster_test.go).
const poolHolderEnv = "AGORA_K8S_TEST_POOL_HOLDER"

// poolHolder is the holder's settings: its lease is Lease, so a test need not wait minutes.
type poolHolder struct {
	Opts     claimerOpts
	Sessions string
	Spec     compute.Spec
	Home     string
	Lease    time.Duration
	Every    time.Duration // the keeper's interval
	PodEnd   string
}

// startHolder starts this test binary as the holder h and returns it (killed at the test's
// end) with the name of the pool it keeps, once kept.
func startHolder(t *testing.T, h poolHolder) (*exec.Cmd, string) {
	t.Helper()
	cfg, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return startChild(t, poolHolderEnv+"="+string(cfg))
}

// poolHolderMain keeps and sweeps as a holder does, every Every, until it is killed. A keep
// or sweep that fails is said and tried again, as the keeper does.
func poolHolderMain() int {
	var h poolHolder
	if err := json.Unmarshal([]byte(os.Getenv(poolHolderEnv)), &h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := h.Opts.options()
	o.Exporter = &netgw.Registry{Dir: h.Sessions}
	p, err := New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	p.testOnlyPoolLease = h.Lease
	p.testOnlyPodMeta = failWith(0, h.PodEnd)
	w, err := p.PoolWarmer(compute.PoolOptions{Home: h.Home, Replicas: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	every := time.NewTicker(h.Every)
	for said := false; ; <-every.C {
		if _, err := w.Keep(ctx, h.Spec); err != nil {
			fmt.Fprintln(os.Stderr, "holder: keep:", err)
			continue
		}
		if !said {
			fmt.Printf("%s\n", w.Held()) // kept: the parent kills this process when it will
			said = true
		}
		if _, err := w.Sweep(ctx, func(string) bool { return false }); err != nil {
			fmt.Fprintln(os.Stderr, "holder: sweep:", err)
		}
	}
}
