package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Warmer is one target's warm pool behind the compute seam ([compute.PoolWarmer]): the
// SandboxWarmPool of the shape of the target's template, which agent-sandbox's controller
// fills, claimed per dispatch with a SandboxClaim (pool.go). Safe for concurrent use.
type Warmer struct {
	p *Provider
	o compute.PoolOptions

	mu   sync.Mutex
	pool *Pool // guarded by mu: the pool Keep last made
}

var _ compute.PoolProvider = (*Provider)(nil)

// PoolWarmer implements [compute.PoolProvider]: the warmer of o's pool in p's namespace.
func (p *Provider) PoolWarmer(o compute.PoolOptions) (compute.PoolWarmer, error) {
	for _, h := range append([]string{o.Home}, o.Former...) {
		if !validHome(h) {
			return nil, fmt.Errorf("warm pool: home %q: want [a-z0-9], 1 to %d bytes", h, maxName)
		}
	}
	if o.Replicas <= 0 {
		return nil, fmt.Errorf("warm pool: %d pods: want at least 1", o.Replicas)
	}
	return &Warmer{p: p, o: o}, nil
}

// options are the pool options of s (a template or a dispatch's spec) under home.
func (w *Warmer) options(s compute.Spec, home string) PoolOptions {
	return PoolOptions{Home: home, Replicas: int32(w.o.Replicas), Places: Places(s)}
}

// Keep implements [compute.PoolWarmer].
func (w *Warmer) Keep(ctx context.Context, tmpl compute.Spec) (int, error) {
	pl, err := w.p.EnsurePool(ctx, tmpl, w.options(tmpl, w.o.Home))
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	old := w.pool
	w.pool = pl
	w.mu.Unlock()
	if old != nil && old.Name != pl.Name {
		// The target's shape changed: the old pool's pods would never be claimed.
		go func() { _ = old.Delete(context.WithoutCancel(ctx)) }()
	}
	if _, err := pl.Refresh(ctx); err != nil {
		return 0, err
	}
	return pl.Ready(ctx)
}

// Held implements [compute.PoolWarmer].
func (w *Warmer) Held() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pool == nil {
		return ""
	}
	return w.pool.Name
}

// Close implements [compute.PoolWarmer].
func (w *Warmer) Close(ctx context.Context) error {
	w.mu.Lock()
	pl := w.pool
	w.pool = nil
	w.mu.Unlock()
	if pl == nil {
		return nil
	}
	return pl.Delete(ctx)
}

// errNoneReady: the pool of the dispatch's shape has no ready pod now.
var errNoneReady = errors.New("no pod of the warm pool is ready")

// Claim implements [compute.PoolWarmer]: it opens the pool of s's shape read-only (a dispatch
// of another shape finds none: [ErrNoPool]), and when a pod of it is ready claims one
// ([Pool.Claim]), binding s to the pod's gateway slot by the pod's uid ([Options.BindPod]).
// A spec run as a leased uid (a root agora) is refused: a pool's pods share one.
func (w *Warmer) Claim(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	if s.RunAs != nil {
		return nil, errors.New("the dispatch runs as a leased uid (a root agora), and a pool's pods share one")
	}
	if w.p.opts.BindPod == nil {
		return nil, errors.New("no gateway slot store binds this target's pool pods")
	}
	pl, err := w.p.OpenPool(ctx, s, w.options(s, w.o.Home))
	if err != nil {
		return nil, err
	}
	if n, err := pl.Ready(ctx); err != nil || n == 0 {
		return nil, errors.Join(errNoneReady, err)
	}
	return pl.Claim(ctx, s, w.p.opts.BindPod)
}

// Adopt implements [compute.PoolWarmer] ([Provider.AdoptPooled]): the pool of s's shape, this
// home's under its current identity or, when the dispatch's claim names it, a former one's.
func (w *Warmer) Adopt(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	return w.p.AdoptPooled(ctx, s, w.options(s, w.o.Home), w.o.Former)
}

// Sweep implements [compute.PoolWarmer]: the pools an older agora of this home left (a holder
// killed with -9: nothing of this agora makes, claims from or refreshes them;
// [Provider.DeleteFormerPools]), the current identity's pools whose lease lapsed (no live
// holder keeps them: [Provider.DeleteLapsedPools]), and the policies of this home's pools that
// nothing stands for any more ([Provider.SweepPools]), current identity's and former ones'.
// A current identity's pool a live holder keeps is never deleted here: its keeps renew it.
func (w *Warmer) Sweep(ctx context.Context, held func(pool string) bool) ([]string, error) {
	gone, err := w.p.DeleteLapsedPools(ctx, w.o.Home, func(pool string) bool { return held(pool) || pool == w.Held() })
	errs := []error{err}
	for _, home := range w.o.Former {
		g, err := w.p.DeleteFormerPools(ctx, home)
		gone, errs = append(gone, g...), append(errs, err)
	}
	for _, home := range append([]string{w.o.Home}, w.o.Former...) {
		g, err := w.p.SweepPools(ctx, home, held)
		gone, errs = append(gone, g...), append(errs, err)
	}
	return gone, errors.Join(errs...)
}

// Sums are the pools agora makes of tmpl for this home (its current identity's and former
// ones'), by name, with their pods' spec digest ([Provider.PoolSum]): what [Warmer.Verifier]
// holds an enrolling pod's pool to.
func (w *Warmer) Sums(ctx context.Context, tmpl compute.Spec) (map[string]string, error) {
	out := map[string]string{}
	for _, home := range append([]string{w.o.Home}, w.o.Former...) {
		pool, sum, err := w.p.PoolSum(ctx, tmpl, w.options(tmpl, home))
		if err != nil {
			return nil, err
		}
		out[pool] = sum
	}
	return out, nil
}

// Verifier is the verifier of the projected tokens this home's pool pods of w's namespace
// enrol with ([PoolVerifier]), for the pools pools names.
func (w *Warmer) Verifier(pools func(context.Context) (map[string]string, error)) remote.PodVerifier {
	return PoolVerifier{P: w.p, Home: w.o.Home, Former: w.o.Former, Pools: pools}
}
