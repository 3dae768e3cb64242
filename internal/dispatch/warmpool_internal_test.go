package dispatch

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

// poolConfig is a home's config with a `warm_pool` target and a slot-Jobs one.
func poolConfig(t *testing.T) *config.Config {
	c := config.Default(t.TempDir())
	base := c.Targets[config.DefaultTarget]
	pool := base
	pool.Provider, pool.Backend, pool.Warm, pool.WarmPool, pool.Namespace = config.ProviderKubernetes, config.BackendAgentSandbox, 2, true, "agents"
	jobs := base
	jobs.Provider, jobs.Backend, jobs.Warm, jobs.Namespace = config.ProviderKubernetes, config.BackendAgentSandbox, 1, "agents"
	c.Targets["pool"], c.Targets["jobs"] = pool, jobs
	return c
}

// TestWarmPool_HolderKeepsOnlyWhatItMay: a target with warm_pool is a pool
// target and never a standby's (WarmPool); a slot-Jobs target on the same backend is not. A
// root agora keeps no pool (its dispatches run as leased uids, which a pool's one uid cannot
// be: they start cold); an unprivileged one keeps one, counted with its want and nothing
// ready before its first cold dispatch, and stops at once (no template: no cluster touched).
func TestWarmPool_HolderKeepsOnlyWhatItMay(t *testing.T) {
	d := &Dispatcher{Config: poolConfig(t), StateDir: t.TempDir()}
	if !d.WarmPool("pool") || d.WarmPool("jobs") || d.WarmPool("nosuch") {
		t.Errorf("WarmPool: pool %v, jobs %v, nosuch %v; want true, false, false", d.WarmPool("pool"), d.WarmPool("jobs"), d.WarmPool("nosuch"))
	}
	if os.Geteuid() == 0 {
		if k := d.KeepPools(t.Context()); k != nil {
			k.Close()
			t.Error("a root agora keeps a pool its dispatches can never claim")
		}
	} else {
		t.Log("SKIP: the root half needs root")
	}
	d.testOnlyInvokingUser = true
	k := d.KeepPools(t.Context())
	if k == nil {
		t.Fatal("no keeper for a warm_pool target")
	}
	c := k.Counts()
	if len(c) != 1 || c[0].Target != "pool" || c[0].Want != 2 || c[0].Ready != 0 || c[0].Claimed != 0 {
		t.Errorf("counts %+v, want the pool target alone: want 2, nothing ready or claimed", c)
	}
	done := make(chan struct{})
	go func() { k.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not stop")
	}
	k.Kick() // after Close: never blocks
	var none *PoolKeeper
	none.Kick()
	if none.Counts() != nil {
		t.Error("a nil keeper counts something")
	}
}

// TestWarmPool_GatewayVerifiesOnlyForPoolTargets: the gateway serves the enrolment route only
// for a home with a warm_pool target (PoolVerifier nil otherwise: no route, no TokenReview
// anyone can make the gateway ask for); and a verifier that names no pod refuses.
func TestWarmPool_GatewayVerifiesOnlyForPoolTargets(t *testing.T) {
	c := poolConfig(t)
	delete(c.Targets, "pool")
	d := &Dispatcher{Config: c, StateDir: t.TempDir()}
	if v, err := d.PoolVerifier(t.Context()); v != nil || err != nil {
		t.Errorf("PoolVerifier without a pool target = %v, %v; want none", v, err)
	}
	// errors.Join of nothing is nil: an empty set must still refuse.
	if id, err := (poolVerifiers{}).VerifyPod(t.Context(), "x.y.z"); err == nil {
		t.Errorf("an empty verifier set accepted a token as %+v", id)
	}
}

// TestOnePerNamespace: what the pool keeper's sweep and the gateway's verifier do once per
// cluster and namespace is done once: the first target of each, in name order, whatever the
// order given.
func TestOnePerNamespace(t *testing.T) {
	c := poolConfig(t)
	other := c.Targets["pool"]
	other.Namespace = "elsewhere"
	ctx2 := c.Targets["pool"]
	ctx2.Context = "prod"
	c.Targets["other"], c.Targets["ctx2"] = other, ctx2
	d := &Dispatcher{Config: c}
	got := d.onePerNamespace([]string{"pool", "other", "jobs", "ctx2"})
	if want := []string{"ctx2", "jobs", "other"}; !slices.Equal(got, want) {
		t.Errorf("onePerNamespace = %v, want %v (jobs and pool share agents in one cluster)", got, want)
	}
}
