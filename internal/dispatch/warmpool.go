package dispatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/netgw"
)

// Pool slots (`warm: N` on a kubernetes target, `backend: agent-sandbox`; config implies
// `warm_pool: true`): the target's N warm pods are agent-sandbox's own SandboxWarmPool
// (kubernetes/pool.go). Nothing of agora's process holds a pod: the controller keeps them, the
// gateway that serves AGORA_HOME/gateway/slots enrols each with its projected token and holds
// its slot. So the roles split:
//
//   - the holder (a [PoolKeeper]: orch serve, agora mcp, a resident Dispatcher) makes the
//     pool from the target's template (the shape of its last cold dispatch, as slots learn it:
//     the file standbys read) and keeps it fresh (Pool.Refresh), every poolKeepEvery and
//     whenever a cold dispatch taught it a shape;
//   - any supervisor of the home (a detached one of serve, the one-shot CLI, a resident one)
//     claims from it at its start (startPool): it opens the pool named for its own spec's shape
//     read-only (OpenPool: a dispatch of another shape finds none), and when a pod of it is
//     ready, claims one (Pool.Claim), which checks the Sandbox and pod, binds the dispatch to
//     the pod's gateway slot by uid (Slots.BindPod) and follows it as a cold Sandbox. No pool,
//     none ready, a root agora (its dispatches run as leased uids; a pool's pods share one), a
//     claim refused: the dispatch starts cold, counted and logged, as a slot's does.
//
// The record, the audit and the patch are a cold dispatch's: the claim happens where the cold
// start would, after the binaries are recorded, and the start is recorded after it as a cold
// start's is.

// poolKeepEvery is how often a holder makes sure of its pools and refreshes them: a pod whose
// worker exited (a gateway restart refused its slot) is replaced within it.
var poolKeepEvery = 15 * time.Second

// warmPoolTarget says whether target keeps its warm pods in a SandboxWarmPool: a kubernetes
// target's warm: N, which config allows on `backend: agent-sandbox` alone.
func warmPoolTarget(t config.Target) bool {
	return t.Warm > 0 && t.Provider == config.ProviderKubernetes && t.WarmPool && t.Backend == config.BackendAgentSandbox
}

// WarmPool says whether target keeps its warm pods in agent-sandbox's SandboxWarmPool: no
// standby holds them (the holder runs a [PoolKeeper]).
func (d *Dispatcher) WarmPool(target string) bool {
	if d.Config == nil {
		return false
	}
	t, ok := d.Config.Targets[target]
	return ok && warmPoolTarget(t)
}

// poolOptions are the pool options of target for spec (a template or a dispatch's spec).
func (d *Dispatcher) poolOptions(t config.Target, spec compute.Spec) (kubernetes.PoolOptions, error) {
	home, err := d.k8sHome()
	if err != nil {
		return kubernetes.PoolOptions{}, fmt.Errorf("kubernetes warm pool: %w", err)
	}
	return kubernetes.PoolOptions{Home: home, Replicas: int32(t.Warm), Places: k8sPlaces(spec)}, nil
}

// startPool runs s's spec in a pod of its target's pool. started false: no pool of its shape,
// none ready, or the claim was refused; the caller starts it cold (counted in a resident
// process's counts; logged everywhere).
func (s *supervision) startPool(ctx context.Context) (compute.Handle, bool) {
	d := s.d
	cold := func(msg string, err error) (compute.Handle, bool) {
		if d.Warm != nil {
			d.Warm.missed(s.r.Target)
		}
		d.log().Warn("kubernetes warm pool: "+msg+"; starting cold", "dispatch", s.r.ID, "target", s.r.Target, "err", err)
		return nil, false
	}
	if s.spec.RunAs != nil {
		return cold("the dispatch runs as a leased uid (a root agora), and a pool's pods share one", nil)
	}
	p, err := d.k8sProvider(ctx, s.r.Target)
	if err != nil {
		return cold("no provider", err)
	}
	opts, err := d.poolOptions(s.target, s.spec)
	if err != nil {
		return cold("this home's identity is unknown", err)
	}
	pl, err := p.OpenPool(ctx, s.spec, opts)
	if errors.Is(err, kubernetes.ErrNoPool) {
		return cold("no pool of the dispatch's shape yet (its holder makes one from a cold dispatch)", nil)
	}
	if err != nil {
		return cold("the pool is not as agora made it", err)
	}
	if n, err := pl.Ready(ctx); err != nil || n == 0 {
		return cold("no pod of the pool is ready", err)
	}
	h, err := pl.Claim(ctx, s.spec, d.k8sSlots().BindPod)
	if err != nil {
		return cold("the claim was refused", err)
	}
	if d.Warm != nil {
		d.Warm.poolClaimed(s.r.Target)
	}
	return h, true
}

// PoolKeeper makes and refreshes the pools of a holder's `warm_pool` targets and counts them
// for doctor, metrics and the web view. Close stops it and deletes the pools (the controller
// deletes their unclaimed pods; claimed ones run on to their end).
type PoolKeeper struct {
	d    *Dispatcher
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	pools   map[string]*kubernetes.Pool // guarded by mu: by target, as last made
	ready   map[string]int              // guarded by mu
	claimed map[string]uint64           // guarded by mu: claims of this process
	failed  map[string]uint64           // guarded by mu: keeps that failed
}

// KeepPools starts the keeper of d's `warm_pool` targets; nil when it has none. A root agora
// keeps none: its dispatches run as leased uids, which a pool's shared one cannot be.
func (d *Dispatcher) KeepPools(ctx context.Context) *PoolKeeper {
	if d.Config == nil || !d.leads() {
		return nil // without a leader's fence in an HA home: the leader's pools (leads)
	}
	any := false
	for name, t := range d.Config.Targets {
		if warmPoolTarget(t) {
			if os.Geteuid() == 0 && !d.testOnlyInvokingUser {
				d.log().Warn("kubernetes warm pool: a root agora runs each dispatch as a uid it leases, and a pool's pods share one; its dispatches start cold", "target", name)
				continue
			}
			any = true
		}
	}
	if !any {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k := &PoolKeeper{d: d, kick: make(chan struct{}, 1), stop: cancel, done: make(chan struct{}),
		pools: map[string]*kubernetes.Pool{}, ready: map[string]int{}, claimed: map[string]uint64{}, failed: map[string]uint64{}}
	go k.loop(ctx)
	return k
}

// Kick asks the keeper to make sure of its pools now (a cold dispatch taught a shape).
func (k *PoolKeeper) Kick() {
	if k == nil {
		return
	}
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *PoolKeeper) loop(ctx context.Context) {
	defer close(k.done)
	t := time.NewTicker(poolKeepEvery)
	defer t.Stop()
	for {
		k.keep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-k.kick:
		}
	}
}

// keep makes sure of each pool target's pool of its current template and refreshes it.
func (k *PoolKeeper) keep(ctx context.Context) {
	d := k.d
	var kept []string
	for name, t := range d.Config.Targets {
		if !warmPoolTarget(t) {
			continue
		}
		tmpl, err := readTemplate(d.StateDir, name)
		if errors.Is(err, ErrNoTemplate) {
			continue // its first dispatch starts cold and teaches it
		}
		kept = append(kept, name)
		pl, n, err := k.keepOne(ctx, name, t, tmpl)
		k.mu.Lock()
		if err != nil {
			k.failed[name]++
			d.log().Warn("kubernetes warm pool: keep the target's pool", "target", name, "err", err)
		}
		if pl != nil {
			if old := k.pools[name]; old != nil && old.Name != pl.Name {
				// The target's shape changed: the old pool's pods would never be claimed.
				go func() { _ = old.Delete(context.WithoutCancel(ctx)) }()
			}
			k.pools[name] = pl
		}
		k.ready[name] = n
		k.mu.Unlock()
	}
	k.sweep(ctx, kept)
}

// sweep deletes the policies of this home's pools that nothing stands for any more (a pool a
// holder deleted at its close or at a change of shape, once its claimed pods ended), once per
// namespace of targets (those with a template: a target that never had one made no pool); the
// pools this keeper holds are never looked at.
func (k *PoolKeeper) sweep(ctx context.Context, targets []string) {
	d := k.d
	k.mu.Lock()
	held := map[string]bool{}
	for _, pl := range k.pools {
		held[pl.Name] = true
	}
	k.mu.Unlock()
	for _, name := range d.onePerNamespace(targets) {
		p, err := d.k8sProvider(ctx, name)
		if err != nil {
			continue // keep logged it
		}
		// The former identity's too: the pools an older agora of this home left (a holder
		// killed with -9: nothing of this agora makes, claims from or refreshes them), and the
		// policies of those it made and deleted at its close (k8sHomes). Its claimed pods run
		// on and are adopted (adoptPooled). The current identity's pools are never deleted
		// here: another holder of the home may hold them. Without the home's identity nothing
		// is swept (a guessed one is another home's); said once per sweep.
		ids, err := d.k8sHomes()
		if err != nil {
			d.log().Warn("kubernetes warm pool: not sweeping the policies of deleted pools", "err", err)
			return
		}
		for _, home := range ids.former {
			gone, err := p.DeleteFormerPools(ctx, home)
			if err != nil {
				d.log().Warn("kubernetes warm pool: delete the pools an older agora of this home left", "target", name, "err", err)
			}
			for _, pool := range gone {
				d.log().Info("kubernetes warm pool: deleted a pool an older agora of this home left", "target", name, "pool", pool)
			}
		}
		for _, home := range append([]string{ids.current}, ids.former...) {
			gone, err := p.SweepPools(ctx, home, func(pool string) bool { return held[pool] })
			if err != nil {
				d.log().Warn("kubernetes warm pool: sweep the policies of deleted pools", "target", name, "err", err)
			}
			for _, pool := range gone {
				d.log().Info("kubernetes warm pool: deleted the network policy of a pool nothing stands for", "target", name, "pool", pool)
			}
		}
	}
}

func (k *PoolKeeper) keepOne(ctx context.Context, name string, t config.Target, tmpl compute.Spec) (*kubernetes.Pool, int, error) {
	p, err := k.d.k8sProvider(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	opts, err := k.d.poolOptions(t, tmpl)
	if err != nil {
		return nil, 0, err
	}
	pl, err := p.EnsurePool(ctx, tmpl, opts)
	if err != nil {
		return nil, 0, err
	}
	if _, err := pl.Refresh(ctx); err != nil {
		return pl, 0, err
	}
	n, err := pl.Ready(ctx)
	return pl, n, err
}

// claimedOne counts a claim of this process.
func (k *PoolKeeper) claimedOne(target string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.claimed[target]++
	k.mu.Unlock()
}

// Counts are the pool targets' numbers: Ready is the SandboxWarmPool's ready pods as last seen.
func (k *PoolKeeper) Counts() []warm.Counts {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []warm.Counts
	for name, t := range k.d.Config.Targets {
		if warmPoolTarget(t) {
			out = append(out, warm.Counts{Target: name, Want: t.Warm, Ready: k.ready[name], Claimed: k.claimed[name], Failed: k.failed[name]})
		}
	}
	return out
}

// Close stops the keeper and deletes its pools.
func (k *PoolKeeper) Close() {
	if k == nil {
		return
	}
	k.stop()
	<-k.done
	k.mu.Lock()
	pools := k.pools
	k.pools = map[string]*kubernetes.Pool{}
	k.mu.Unlock()
	for name, pl := range pools {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := pl.Delete(ctx); err != nil {
			k.d.log().Warn("kubernetes warm pool: delete the target's pool", "target", name, "err", err)
		}
		cancel()
	}
}

// onePerNamespace is targets sorted, with only the first of each cluster and namespace
// (kubeconfig, context, namespace): what is done once per namespace is done once.
func (d *Dispatcher) onePerNamespace(targets []string) []string {
	sorted := slices.Sorted(slices.Values(targets))
	seen := map[string]bool{}
	var out []string
	for _, name := range sorted {
		t := d.Config.Targets[name]
		key := t.Kubeconfig + "\x00" + t.Context + "\x00" + t.Namespace
		if !seen[key] {
			seen[key] = true
			out = append(out, name)
		}
	}
	return out
}

// PoolVerifier is what the gateway serving this home verifies pool pods' projected tokens with
// (netgw.Server.Pods): the TokenReview of each `warm_pool` target's cluster and namespace, for
// this home's audiences alone (its current identity's and its former one's); nil when no target
// keeps a pool (the gateway serves no enrolment). A token is accepted when one of them names a
// live, unclaimed pod of one of this home's pools in its namespace.
func (d *Dispatcher) PoolVerifier(ctx context.Context) (netgw.PodVerifier, error) {
	if d.Config == nil {
		return nil, nil
	}
	var vs poolVerifiers
	var pools []string
	for name, t := range d.Config.Targets {
		if warmPoolTarget(t) {
			pools = append(pools, name)
		}
	}
	for _, name := range d.onePerNamespace(pools) {
		p, err := d.k8sProvider(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("kubernetes warm pool of target %q: %w", name, err)
		}
		// The former identity's audience too: a pod of a pool an older agora of this home made
		// enrols with it (k8sHomes), and its pod and pool must carry that identity.
		ids, err := d.k8sHomes()
		if err != nil {
			return nil, fmt.Errorf("kubernetes warm pool of target %q: %w", name, err)
		}
		vs = append(vs, kubernetes.PoolVerifier{P: p, Home: ids.current, Former: ids.former, Pools: d.knownPools(pools, ids)})
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return vs, nil
}

// knownPools is what the gateway holds an enrolling pod's pool to (PoolVerifier.Pools): the
// pools the keeper makes, and an older agora of the home made, from each pool target's
// template (its last cold dispatch's), read afresh at each enrolment: a target whose template
// changed has a pool of another name. A target with no template yet has no pool.
func (d *Dispatcher) knownPools(targets []string, ids k8sHomeIDs) func(context.Context) (map[string]string, error) {
	return func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, name := range targets {
			tmpl, err := readTemplate(d.StateDir, name)
			if err != nil {
				continue // no template: no pool of this target's
			}
			p, err := d.k8sProvider(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("target %q: %w", name, err)
			}
			opts, err := d.poolOptions(d.Config.Targets[name], tmpl)
			if err != nil {
				return nil, err
			}
			for _, home := range append([]string{ids.current}, ids.former...) {
				opts.Home = home
				pool, sum, err := p.PoolSum(ctx, tmpl, opts)
				if err != nil {
					return nil, fmt.Errorf("target %q: %w", name, err)
				}
				out[pool] = sum
			}
		}
		return out, nil
	}
}

// poolVerifiers accept a token one of them accepts (one per cluster and namespace: each
// TokenReview is for this home's audiences, and each names the pod in its own namespace).
type poolVerifiers []kubernetes.PoolVerifier

func (vs poolVerifiers) VerifyPod(ctx context.Context, token string) (remote.PodIdentity, error) {
	var errs []error
	for _, v := range vs {
		id, err := v.VerifyPod(ctx, token)
		if err == nil {
			return id, nil
		}
		errs = append(errs, err) // never the token (PoolVerifier's errors do not carry it)
	}
	if len(errs) == 0 {
		return remote.PodIdentity{}, errors.New("no warm pool target verifies pool pods") // never accept by default
	}
	return remote.PodIdentity{}, errors.Join(errs...)
}

// adoptPooled is adoptSandbox for a dispatch that ran in a pod of its target's warm pool
// (startPool): no Job or Sandbox is named for it, so the pool of its shape, this home's under
// its current identity or, when the dispatch's claim names it, under a former one (a dispatch
// claimed before an upgrade: k8sHomes), its policy as agora made it, finds the pod through the
// claim (kubernetes.Provider.AdoptPooled). nil, nil when there is no such pool's policy any
// more or the dispatch never reached a pod of it: it ends lost.
func (s *supervision) adoptPooled(ctx context.Context) (compute.Handle, error) {
	p, err := s.d.k8sProvider(ctx, s.r.Target)
	if err != nil {
		return nil, err
	}
	opts, err := s.d.poolOptions(s.target, s.spec)
	if err != nil {
		return nil, err
	}
	ids, err := s.d.k8sHomes()
	if err != nil {
		return nil, err
	}
	return p.AdoptPooled(ctx, s.spec, opts, ids.former)
}
