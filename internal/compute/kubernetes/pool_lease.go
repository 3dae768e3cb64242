package kubernetes

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A pool's lease (docs/adr/0024-a-pool-is-held-by-a-lease.md): the holders of a home keep its
// pools of the current identity, and a holder killed with -9 never deletes the pool it kept.
// Its successor, taught another shape, keeps another pool; the dead one's pool would run its
// warm pods for ever, and nothing in the cluster says whether some other live holder (orch
// serve and agora mcp side by side) keeps it. So each holder says so on the pool's template:
// annotationHeldUntil, the instant its keep lapses, written when the template is made and
// renewed at each keep ([Provider.EnsurePool]; the dispatch's keeper keeps every 15 s). A
// sweep of the home deletes a pool whose lease lapsed ([Provider.DeleteLapsedPools]), as its
// template was read (uid and resourceVersion), so a renewal that lands first keeps it.

// annotationHeldUntil, on a pool's template, is when the last keep of it lapses (RFC 3339, UTC).
const annotationHeldUntil = "agora.dev/held-until"

// poolLease is how long a keep holds a pool: eight of the keeper's 15 s keeps, so a holder
// whose keeps fail or run late for less than that keeps its pool, and the holders' clocks may
// differ by most of it. A dead holder's pool goes at the first sweep after it lapses.
const poolLease = 2 * time.Minute

// heldUntil is the lease of a keep of p's at now.
func (p *Provider) heldUntil(now time.Time) string {
	lease := poolLease
	if p.testOnlyPoolLease != 0 {
		lease = p.testOnlyPoolLease
	}
	return now.Add(lease).UTC().Format(time.RFC3339)
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

// lapsed reports whether t's lease ran out by now. A template with none (made by an agora
// that kept no lease) or an unreadable one lapses a lease after it was made.
func lapsed(t *templateObject, now time.Time) bool {
	until, err := time.Parse(time.RFC3339, t.Annotations[annotationHeldUntil])
	if err != nil {
		until = t.CreationTimestamp.Add(poolLease)
	}
	return now.After(until)
}

// DeleteLapsedPools deletes home's pools whose lease lapsed (no live holder keeps them: the
// one that did was killed, or lost the cluster for a lease), but those keep names. Each is
// found by its policy, as DeleteFormerPools finds a former identity's, and its template is
// deleted as it was read (its uid and resourceVersion: a holder's renewal since keeps it); with
// it, by ownership, its warm pool, Secret and unclaimed Sandboxes. A claimed pod runs on, owned
// by its claim; the policy stays until SweepPools finds nothing of the pool standing. A holder
// that keeps the pool again after its lapse makes it again.
func (p *Provider) DeleteLapsedPools(ctx context.Context, home string, keep func(pool string) bool) ([]string, error) {
	now := time.Now()
	return p.deleteHomePools(ctx, home, "lapsed", func(t *templateObject) bool {
		return !keep(t.Name) && lapsed(t, now)
	})
}
