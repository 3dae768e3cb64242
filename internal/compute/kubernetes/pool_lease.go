package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A pool's lease (docs/adr/0024-a-pool-is-held-by-a-lease-on-its-template.md): the holders
// of a home keep its pools of the current identity, and a holder killed with -9 never deletes
// the pool it kept. Its successor, taught another shape, keeps another pool; the dead one's
// pool would run its warm pods for ever, and nothing in the cluster says whether some other
// live holder (orch serve and agora mcp side by side) keeps it. So each holder says so on the
// pool's template: annotationHeldUntil, written when the template is made and renewed at each
// keep ([Provider.EnsurePool]; the dispatch's keeper keeps every 15 s).
//
// A sweep never compares that stamp with its own clock: the holders' clocks may differ by more
// than a lease, and any tenant of the namespace with patch on templates may write any value
// there. As client-go's leader election does, a sweeping provider watches each pool's lease
// (its template's uid and stamp) on its own monotonic clock, and deletes a pool only once it
// has seen that lease unchanged for a whole lease ([Provider.DeleteLapsedPools]): a live
// holder's keep changes it eight times a lease, whatever its clock says; a dead holder's stays
// as it was, whatever it says. The delete names the template as it was read (uid and
// resourceVersion), so a renewal that lands first keeps the pool.

// annotationHeldUntil, on a pool's template, is when the last keep of it lapses (RFC 3339,
// UTC) by its holder's clock: for people, and for sweeps a mark that changes at every keep.
const annotationHeldUntil = "agora.dev/held-until"

// poolLease is how long a keep holds a pool: eight of the keeper's 15 s keeps, so a holder
// whose keeps fail or run late for less than that keeps its pool. A dead holder's pool goes at
// the first sweep after another holder has watched its lease unchanged for that long.
const poolLease = 2 * time.Minute

// lease is p's poolLease.
func (p *Provider) lease() time.Duration {
	return cmp.Or(p.testOnlyPoolLease, poolLease)
}

// heldUntil is the lease of a keep of p's at now. Sweeps read it as a mark that changes at
// every keep, not as an instant: only its holder's clock wrote it.
func (p *Provider) heldUntil(now time.Time) string {
	return now.Add(p.lease()).UTC().Format(time.RFC3339)
}

// leaseSeen is a pool's lease as p's sweeps watch it: its template's uid and stamp, and when,
// on p's monotonic clock, a sweep first read them so.
type leaseSeen struct {
	uid   types.UID
	stamp string
	since time.Time
}

// renew marks the pool's template, as made (its uid), held for a lease from now.
func (pl *Pool) renew(ctx context.Context) error {
	p := pl.p
	patch := fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, pl.tmplUID, annotationHeldUntil, p.heldUntil(time.Now()))
	if _, err := p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(ctx, pl.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("pool %s: renew its lease: %w", pl.Name, err)
	}
	return nil
}

// lapsed reports whether p's sweeps have watched t's lease unchanged for a whole lease by now
// (a time.Now reading: its monotonic clock). The stamp's value is never read as an instant: a
// holder whose clock runs behind, a stamp backdated or set a thousand years on, one that is no
// instant at all, each counts only by whether it changes. A template with no stamp (made by an
// agora that kept no lease) lapses once watched for a lease, as a dead holder's does. seen are
// the leases this sweep read, which replace p's watch at its end.
func (p *Provider) lapsed(t *templateObject, now time.Time, seen map[string]leaseSeen) bool {
	stamp := t.Annotations[annotationHeldUntil]
	p.mu.Lock()
	was, ok := p.leases[t.Name]
	p.mu.Unlock()
	if !ok || was.uid != t.UID || was.stamp != stamp {
		was = leaseSeen{uid: t.UID, stamp: stamp, since: now}
	}
	seen[t.Name] = was
	return now.Sub(was.since) >= p.lease()
}

// DeleteLapsedPools deletes home's pools whose lease lapsed (no live holder keeps them: the
// one that did was killed, or lost the cluster for a lease), but those keep names. A pool's
// lease lapses once this provider's sweeps have watched it unchanged for a whole lease (pool
// leases above): the first sweep of a provider deletes nothing, and a sweep that could not
// list the pools starts the watch again (a later delete, never a sooner one). Each is found
// by its policy, as DeleteFormerPools finds a former identity's, and its template is deleted
// as it was read (its uid and resourceVersion: a holder's renewal since keeps it); with it,
// by ownership, its warm pool, Secret and unclaimed Sandboxes. A claimed pod runs on, owned by its claim; the policy stays
// until SweepPools finds nothing of the pool standing. A holder that keeps the pool again
// after its lapse makes it again.
func (p *Provider) DeleteLapsedPools(ctx context.Context, home string, keep func(pool string) bool) ([]string, error) {
	now := time.Now()
	seen := map[string]leaseSeen{}
	gone, err := p.deleteHomePools(ctx, home, "lapsed", func(t *templateObject) bool {
		return !keep(t.Name) && p.lapsed(t, now, seen)
	})
	for _, name := range gone {
		delete(seen, name)
	}
	p.mu.Lock()
	p.leases = seen
	p.mu.Unlock()
	return gone, err
}
