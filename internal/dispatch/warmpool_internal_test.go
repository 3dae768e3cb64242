package dispatch

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

// poolConfig is a home's config with a `warm_pool` target and a slot-Jobs one.
func poolConfig(t *testing.T) *config.Config {
	c := config.Default(t.TempDir())
	base := c.Targets[config.DefaultTarget]
	pool := base
	pool.Provider, pool.Backend, pool.Warm, pool.WarmPool, pool.Namespace = config.ProviderKubernetes, config.BackendAgentSandbox, 2, new(true), "agents"
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

// TestWarmPool_ExplicitFalseKeepsNoPool: `warm_pool: false` beside `warm: N` on an
// agent-sandbox target is refused when agora.yaml is read, naming both keys, so no holder ever
// keeps a pool for it; and a target given so in code (no agora.yaml) is no pool target
// either: the explicit false is honoured, never read as unset.
func TestWarmPool_ExplicitFalseKeepsNoPool(t *testing.T) {
	const digest = "@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	yaml := "gateway: {advertise: https://h:1}\ntargets:\n  pool:\n    provider: kubernetes\n" +
		"    image: registry.example/toolchain" + digest + "\n    worker_image: localhost/agora-worker" + digest + "\n" +
		"    namespace: agents\n    backend: agent-sandbox\n    warm: 2\n    warm_pool: false\n"
	err := config.Parse("agora.yaml", []byte(yaml), config.Default(t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "targets.pool.warm_pool") || !strings.Contains(err.Error(), "warm: 2") {
		t.Fatalf("Parse of warm: 2 with warm_pool: false = %v; want refused, naming warm_pool and warm", err)
	}
	// The same file without the false keeps a pool: the refusal is of the false alone.
	c := config.Default(t.TempDir())
	if err := config.Parse("agora.yaml", []byte(strings.Replace(yaml, "    warm_pool: false\n", "", 1)), c); err != nil {
		t.Fatal(err)
	}
	if d := (&Dispatcher{Config: c}); !d.WarmPool("pool") {
		t.Fatal("warm: 2 on an agent-sandbox target keeps no pool")
	}
	c = poolConfig(t)
	off := c.Targets["pool"]
	off.WarmPool = new(false)
	c.Targets["pool"] = off
	d := &Dispatcher{Config: c, StateDir: t.TempDir(), testOnlyInvokingUser: true}
	if d.WarmPool("pool") {
		t.Error("a target with warm_pool false is a pool target")
	}
	if k := d.KeepPools(t.Context()); k != nil {
		k.Close()
		t.Error("a keeper keeps a pool for a target with warm_pool false")
	}
}
