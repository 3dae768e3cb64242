package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SweepPools deletes the NetworkPolicies home's pools left behind. Pool.Delete takes a pool's
// template (and with it, by ownership, its SandboxWarmPool, Secret and unclaimed Sandboxes) but
// not its policy: a claimed pod, owned by its claim, may still run a dispatch the policy
// confines. Once nothing of the pool stands (no template, no warm pool, no Sandbox made from
// it, no pod of it), the policy confines nothing and this deletes it, as it was listed (its
// uid). keep names the pools the caller holds: never looked at. Another home's pools are never
// touched. It returns the pools whose policy it deleted.
//
// A holder of the same home may be making the pool again as this runs (EnsurePool took the
// standing policy, then made the template): the pool is looked at again after the delete, and
// if anything of it now stands the policy is made again as it was. A claim of that pool
// meanwhile is refused (its policy's uid changed, Pool.check) and starts cold; the holder's
// next EnsurePool takes the new policy. Nothing of the pool runs a dispatch unconfined.
func (p *Provider) SweepPools(ctx context.Context, home string, keep func(name string) bool) ([]string, error) {
	if !validHome(home) {
		return nil, fmt.Errorf("sweep warm pools: home %q: want [a-z0-9], 1 to %d bytes", home, maxName)
	}
	l, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labelManagedBy + "=" + managedBy + "," + labelPool + "," + labelHome + "=" + home})
	if err != nil {
		return nil, fmt.Errorf("sweep warm pools: list network policies: %w", err)
	}
	var gone []string
	var errs []error
	for i := range l.Items {
		np := &l.Items[i]
		name := np.Name
		if !strings.HasPrefix(name, poolPrefix) || np.Labels[labelPool] != name || np.Labels[labelHome] != home ||
			np.DeletionTimestamp != nil || keep(name) {
			continue
		}
		swept, err := p.sweepPoolPolicy(ctx, np)
		if err != nil {
			errs = append(errs, err)
		}
		if swept {
			gone = append(gone, name)
		}
	}
	return gone, errors.Join(errs...)
}

// DeleteFormerPools deletes the pools an older agora of this home left under former, an
// identity the home's objects carried before (dispatch.k8sHomes): a holder of that agora
// killed with -9 never deleted them, and no holder of this one makes, claims from or refreshes
// them (their name and audience hash the former identity). Each is found by its policy (made
// first, standing while anything of the pool does; the Role lists policies, not templates),
// and its template is deleted as it was read (its uid): with it, by ownership, its warm pool,
// Secret and unclaimed Sandboxes. A claimed pod runs on, owned by its claim, and is adopted
// through it (Provider.AdoptPooled); the policy stays until SweepPools finds nothing of the
// pool standing. Only objects labelled with former are looked at: another home's pools never.
//
// Never called with the home's current identity: another holder of the home (orch serve and
// agora mcp side by side) may hold those pools, and only their lease says whether one does
// (DeleteLapsedPools). An older agora of this home still running beside
// this one after the upgrade loses its pool at each sweep and makes it again; its claims start
// cold meanwhile.
func (p *Provider) DeleteFormerPools(ctx context.Context, former string) ([]string, error) {
	return p.deleteHomePools(ctx, former, "former", func(*templateObject) bool { return true })
}

// deleteHomePools deletes home's pools whose template del chooses: each found by its policy
// (made first, standing while anything of the pool does; the Role lists policies, not
// templates), its template deleted as it was read (its uid and resourceVersion). what names
// the pools in messages ("former", "lapsed"). Only objects labelled with home are looked at.
func (p *Provider) deleteHomePools(ctx context.Context, home, what string, del func(t *templateObject) bool) ([]string, error) {
	if !validHome(home) {
		return nil, fmt.Errorf("delete %s warm pools: home %q: want [a-z0-9], 1 to %d bytes", what, home, maxName)
	}
	l, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(ctx, metav1.ListOptions{
		LabelSelector: labelManagedBy + "=" + managedBy + "," + labelPool + "," + labelHome + "=" + home})
	if err != nil {
		return nil, fmt.Errorf("delete %s warm pools: list network policies: %w", what, err)
	}
	var gone []string
	var errs []error
	for i := range l.Items {
		name := l.Items[i].Name
		if !strings.HasPrefix(name, poolPrefix) || l.Items[i].Labels[labelPool] != name || l.Items[i].Labels[labelHome] != home {
			continue
		}
		deleted, err := p.deleteHomePool(ctx, home, what, name, del)
		if errors.As(err, new(fencedError)) {
			return gone, errors.Join(append(errs, err)...)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if deleted {
			gone = append(gone, name)
		}
	}
	return gone, errors.Join(errs...)
}

// poolDeleteReads is how many times deleteHomePool reads a template whose delete found it
// changed since it was read: the agent-sandbox controller updates a template it reconciles,
// and each change made the sweep pass over a pool it should delete until the next sweep.
const poolDeleteReads = 3

// fencedError is deleteHomePool's error when this agora may no longer change the cluster:
// the sweep stops there. Its message is the fence's.
type fencedError struct{ error }

func (e fencedError) Unwrap() error { return e.error }

// deleteHomePool deletes home's pool name when its template, as read, is agora's and del
// chooses it: the template is deleted as it was read (its uid and resourceVersion), and read
// again when it changed meanwhile (a holder renewed its lease, the controller updated it), so
// del decides on what stands; a template made again meanwhile (another uid) is left. It
// reports whether it deleted the pool.
func (p *Provider) deleteHomePool(ctx context.Context, home, what, name string, del func(t *templateObject) bool) (bool, error) {
	var first types.UID
	for range poolDeleteReads {
		t, err := p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil // deleted already: SweepPools takes the policy
		case err != nil:
			return false, fmt.Errorf("delete %s warm pool %s: %w", what, name, err)
		case first != "" && t.UID != first:
			return false, nil // another template now, made since the first read: not this sweep's to judge
		}
		first = t.UID
		switch {
		case t.Labels[labelManagedBy] != managedBy || t.Labels[labelPool] != name || t.Labels[labelHome] != home || t.DeletionTimestamp != nil:
			return false, nil // not that pool's template as agora made it, or going
		case !del(t):
			return false, nil
		}
		if err := fenced(fmt.Sprintf("delete %s warm pool %s", what, name)); err != nil {
			return false, fencedError{err}
		}
		if p.testOnlyPoolLapsing != nil {
			p.testOnlyPoolLapsing(name)
		}
		err = p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Delete(ctx, name, metav1.DeleteOptions{
			PropagationPolicy: ptrTo(metav1.DeletePropagationBackground),
			Preconditions:     &metav1.Preconditions{UID: &t.UID, ResourceVersion: &t.ResourceVersion}})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil // another sweep took it
		case apierrors.IsConflict(err):
			continue // it changed since it was read (or is another template now): read it again
		case err != nil:
			return false, fmt.Errorf("delete %s warm pool %s: %w", what, name, err)
		}
		return true, nil
	}
	return false, nil // changing under every read: the next sweep looks again
}

// sweepPoolPolicy deletes np when nothing of its pool stands, and makes it again if something
// of the pool appeared meanwhile. It reports whether the policy is gone.
func (p *Provider) sweepPoolPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) (bool, error) {
	name := np.Name
	if err := fenced("sweep warm pool " + name); err != nil {
		return false, err
	}
	if used, err := p.poolStands(ctx, name); used || err != nil {
		return false, err
	}
	uid := np.UID
	err := p.client.NetworkingV1().NetworkPolicies(p.ns).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil // another sweep took it, or it is another policy now
	}
	if err != nil {
		return false, fmt.Errorf("sweep warm pool %s: delete its network policy: %w", name, err)
	}
	if p.testOnlyPoolSwept != nil {
		p.testOnlyPoolSwept(name)
	}
	used, err := p.poolStands(ctx, name)
	if !used && err == nil {
		return true, p.deleteGuard(ctx, name)
	}
	// Unsure or in use again: the policy is made again, as it was.
	again := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: np.Labels, Annotations: np.Annotations},
		Spec:       np.Spec,
	}
	_, cerr := p.client.NetworkingV1().NetworkPolicies(p.ns).Create(context.WithoutCancel(ctx), again, metav1.CreateOptions{})
	if cerr != nil && !apierrors.IsAlreadyExists(cerr) {
		return true, errors.Join(err, fmt.Errorf("sweep warm pool %s: its pool stands again, and its network policy could not be made again: %w", name, cerr))
	}
	return false, err
}

// poolStands reports whether anything of pool name stands: its template (even one being
// deleted), its warm pool, a Sandbox made from it, or a pod of it. An error counts as standing.
func (p *Provider) poolStands(ctx context.Context, name string) (bool, error) {
	_, err := p.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return true, wrapStands(name, "sandbox template", err)
	}
	_, err = p.client.ExtensionsV1beta1().SandboxWarmPools(p.ns).Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return true, wrapStands(name, "sandbox warm pool", err)
	}
	pods, err := p.client.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: labelPool + "=" + name, Limit: 1})
	if err != nil || len(pods.Items) > 0 {
		return true, wrapStands(name, "pods", err)
	}
	sbs, err := p.client.AgentsV1beta1().Sandboxes(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return true, wrapStands(name, "sandboxes", err)
	}
	for i := range sbs.Items {
		sb := &sbs.Items[i]
		ref, _ := controllerRef(sb.OwnerReferences)
		if sb.Spec.PodTemplate.Metadata.Labels[labelPool] == name || ref.Kind == "SandboxWarmPool" && ref.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// wrapStands states a look at the pool that failed; nil stays nil.
func wrapStands(pool, what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sweep warm pool %s: look for its %s: %w", pool, what, err)
}
