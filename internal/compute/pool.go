package compute

import "context"

// A pool is a target's warm sandboxes that a controller of the provider keeps (agent-sandbox's
// SandboxWarmPool): nothing of agora holds them, so there is no [Warmer.Fill] and no holder to
// reap after. A holder (serve, agora mcp, a resident dispatcher) keeps the pool of a
// template's shape; any supervisor of the home claims from it where it would start cold, and
// a supervisor that took a dead one's dispatch over adopts it through the claim.

// PoolProvider is a provider whose warm sandboxes are kept in a pool.
type PoolProvider interface {
	// PoolWarmer returns the warmer of one target's pool.
	PoolWarmer(o PoolOptions) (PoolWarmer, error)
}

// PoolOptions say whose a target's pool is and how large.
type PoolOptions struct {
	// Home is the holder's home's identity on the cluster, the same for every replica of it:
	// its pools' labels and their pods' token audience. An opaque [a-z0-9] value, 1 to 63
	// bytes. Required.
	Home string
	// Former are identities an older agora gave the same home: their pools are swept and
	// their claimed pods adopted as Home's, never made.
	Former []string
	// Replicas is the pool's size (the target's warm: N).
	Replicas int
}

// PoolWarmer keeps, claims from and sweeps one target's pool.
type PoolWarmer interface {
	// Keep makes sure of the pool of tmpl's shape (made as the provider makes it, or found
	// so), renews this holder's lease of it, replaces its pods that can no longer be claimed
	// and returns how many are ready. A pool Keep made for another shape before is deleted:
	// its pods would never be claimed. A holder keeps its pools at least every 15 s.
	Keep(ctx context.Context, tmpl Spec) (ready int, err error)
	// Held names the pool Keep last made; "" when none.
	Held() string
	// Claim runs s in a ready pod of the pool of its shape. Any error means nothing of s ran:
	// the caller starts it cold.
	Claim(ctx context.Context, s Spec) (Handle, error)
	// Adopt follows a dispatch that ran in a pod of the pool of s's shape, found through its
	// claim; nil, nil when there is no such pool or the dispatch never reached a pod of it.
	Adopt(ctx context.Context, s Spec) (Handle, error)
	// Sweep deletes what this home's pools in the target's namespace left that nothing stands
	// for, and its pools no live holder keeps any more (their lease lapsed: a holder killed
	// with -9), but the pools held names, and returns what it deleted.
	Sweep(ctx context.Context, held func(pool string) bool) (gone []string, err error)
	// Close deletes the pool Keep made (the controller deletes its unclaimed pods; claimed
	// ones run on to their end).
	Close(ctx context.Context) error
}
