package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/config"
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
	return t.Warm > 0 && t.Provider == config.ProviderKubernetes && t.KeepsPool() && t.Backend == config.BackendAgentSandbox
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

// poolWarmer is target's pool warmer under this home's identities (k8sHomes).
func (d *Dispatcher) poolWarmer(ctx context.Context, target string, t config.Target) (compute.PoolWarmer, error) {
	p, err := d.providerFor(ctx, target)
	if err != nil {
		return nil, err
	}
	pp, ok := p.(compute.PoolProvider)
	if !ok {
		return nil, fmt.Errorf("target %q: its provider keeps no warm pool", target)
	}
	ids, err := d.k8sHomes()
	if err != nil {
		return nil, fmt.Errorf("kubernetes warm pool: %w", err)
	}
	return pp.PoolWarmer(compute.PoolOptions{Home: ids.current, Former: ids.former, Replicas: t.Warm})
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
	pw, err := d.poolWarmer(ctx, s.r.Target, s.target)
	if err != nil {
		return cold("no pool warmer", err)
	}
	h, err := pw.Claim(ctx, s.spec)
	if err != nil {
		return cold("no warm start", err)
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
	warmers map[string]compute.PoolWarmer // guarded by mu: by target, once kept
	ready   map[string]int                // guarded by mu
	claimed map[string]uint64             // guarded by mu: claims of this process
	failed  map[string]uint64             // guarded by mu: keeps that failed
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
		warmers: map[string]compute.PoolWarmer{}, ready: map[string]int{}, claimed: map[string]uint64{}, failed: map[string]uint64{}}
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
		n, err := k.keepOne(ctx, name, t, tmpl)
		k.mu.Lock()
		if err != nil {
			k.failed[name]++
			d.log().Warn("kubernetes warm pool: keep the target's pool", "target", name, "err", err)
		}
		k.ready[name] = n
		k.mu.Unlock()
	}
	k.sweep(ctx, kept)
}

// sweep deletes this home's pools whose lease lapsed (their holder was killed with -9: no keep
// renews them) and the policies of its pools that nothing stands for any more (a pool a holder
// deleted at its close or at a change of shape, once its claimed pods ended), once per
// namespace of targets (those with a template: a target that never had one made no pool); the
// pools this keeper holds are never looked at.
func (k *PoolKeeper) sweep(ctx context.Context, targets []string) {
	d := k.d
	k.mu.Lock()
	held := map[string]bool{}
	for _, pw := range k.warmers {
		if name := pw.Held(); name != "" {
			held[name] = true
		}
	}
	k.mu.Unlock()
	for _, name := range d.onePerNamespace(targets) {
		// Without the home's identity nothing is swept (a guessed one is another home's):
		// poolWarmer refuses.
		pw, err := d.poolWarmer(ctx, name, d.Config.Targets[name])
		if err != nil {
			d.log().Warn("kubernetes warm pool: not sweeping what deleted pools left", "target", name, "err", err)
			continue
		}
		gone, err := pw.Sweep(ctx, func(pool string) bool { return held[pool] })
		if err != nil {
			d.log().Warn("kubernetes warm pool: sweep what deleted pools left", "target", name, "err", err)
		}
		for _, pool := range gone {
			d.log().Info("kubernetes warm pool: deleted what nothing stands for", "target", name, "pool", pool)
		}
	}
}

// keepOne keeps target's pool of tmpl through its warmer, made the first time.
func (k *PoolKeeper) keepOne(ctx context.Context, name string, t config.Target, tmpl compute.Spec) (int, error) {
	k.mu.Lock()
	pw := k.warmers[name]
	k.mu.Unlock()
	if pw == nil {
		var err error
		if pw, err = k.d.poolWarmer(ctx, name, t); err != nil {
			return 0, err
		}
		k.mu.Lock()
		k.warmers[name] = pw
		k.mu.Unlock()
	}
	return pw.Keep(ctx, tmpl)
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
	warmers := k.warmers
	k.warmers = map[string]compute.PoolWarmer{}
	k.mu.Unlock()
	for name, pw := range warmers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := pw.Close(ctx); err != nil {
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

// podEnrolment is a pool warmer whose pods enrol at the gateway with a token the cluster
// verifies (kubernetes.Warmer).
type podEnrolment interface {
	// Sums are the pools the warmer makes of tmpl, by name, with their pods' spec digest.
	Sums(ctx context.Context, tmpl compute.Spec) (map[string]string, error)
	// Verifier verifies the tokens of the pods of the pools pools names.
	Verifier(pools func(context.Context) (map[string]string, error)) remote.PodVerifier
}

// PoolVerifier is what the gateway serving this home verifies pool pods' projected tokens with
// (netgw.Server.Pods): each `warm_pool` target's cluster and namespace's, for this home's
// audiences alone (its current identity's and its former one's); nil when no target keeps a
// pool (the gateway serves no enrolment). A token is accepted when one of them names a live,
// unclaimed pod of one of this home's pools in its namespace.
func (d *Dispatcher) PoolVerifier(ctx context.Context) (remote.PodVerifier, error) {
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
		pw, err := d.poolWarmer(ctx, name, d.Config.Targets[name])
		if err != nil {
			return nil, fmt.Errorf("kubernetes warm pool of target %q: %w", name, err)
		}
		e, ok := pw.(podEnrolment)
		if !ok {
			return nil, fmt.Errorf("kubernetes warm pool of target %q: its pods enrol nowhere", name)
		}
		vs = append(vs, e.Verifier(d.knownPools(pools)))
	}
	if len(vs) == 0 {
		return nil, nil
	}
	return vs, nil
}

// knownPools is what the gateway holds an enrolling pod's pool to (kubernetes.PoolVerifier's
// Pools): the pools the keeper makes, and an older agora of the home made, from each pool
// target's template (its last cold dispatch's), read afresh at each enrolment: a target whose
// template changed has a pool of another name. A target with no template yet has no pool.
func (d *Dispatcher) knownPools(targets []string) func(context.Context) (map[string]string, error) {
	return func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, name := range targets {
			tmpl, err := readTemplate(d.StateDir, name)
			if err != nil {
				continue // no template: no pool of this target's
			}
			pw, err := d.poolWarmer(ctx, name, d.Config.Targets[name])
			if err != nil {
				return nil, fmt.Errorf("target %q: %w", name, err)
			}
			e, ok := pw.(podEnrolment)
			if !ok {
				continue
			}
			sums, err := e.Sums(ctx, tmpl)
			if err != nil {
				return nil, fmt.Errorf("target %q: %w", name, err)
			}
			maps.Copy(out, sums)
		}
		return out, nil
	}
}

// poolVerifiers accept a token one of them accepts (one per cluster and namespace: each
// TokenReview is for this home's audiences, and each names the pod in its own namespace).
type poolVerifiers []remote.PodVerifier

func (vs poolVerifiers) VerifyPod(ctx context.Context, token string) (remote.PodIdentity, error) {
	var errs []error
	for _, v := range vs {
		id, err := v.VerifyPod(ctx, token)
		if err == nil {
			return id, nil
		}
		errs = append(errs, err) // never the token (the verifiers' errors do not carry it)
	}
	if len(errs) == 0 {
		return remote.PodIdentity{}, errors.New("no warm pool target verifies pool pods") // never accept by default
	}
	return remote.PodIdentity{}, errors.Join(errs...)
}

// adoptPooled is adoptSandbox for a dispatch that ran in a pod of its target's warm pool
// (startPool): no Job or Sandbox is named for it, so its target's pool warmer finds the pod
// through the claim (compute.PoolWarmer.Adopt). nil, nil when there is no such pool's policy
// any more or the dispatch never reached a pod of it: it ends lost.
func (s *supervision) adoptPooled(ctx context.Context) (compute.Handle, error) {
	pw, err := s.d.poolWarmer(ctx, s.r.Target, s.target)
	if err != nil {
		return nil, err
	}
	return pw.Adopt(ctx, s.spec)
}
