package kubernetes

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// managedPolicySuffix: agent-sandbox's SandboxTemplate controller names the NetworkPolicy it
// makes for a Managed template <template>-network-policy. That policy selects every pod made
// from the template by its template-ref-hash label, a claimed pod running a dispatch included,
// and admits egress to every public address; policies add up, so the pool's policy would no
// longer confine the dispatch. The controller never takes over a policy of that name it does
// not control.
const managedPolicySuffix = "-network-policy"

// guardName is the name the controller would give pool name's Managed policy.
func guardName(pool string) string { return pool + managedPolicySuffix }

// guardPolicyObject is the policy that holds that name for pool name: it selects the pool's
// pods and admits nothing, so it takes nothing from the pool's policy. Whoever may edit the
// pool's template (and no NetworkPolicy) can turn it Managed after a dispatch claimed a pod of
// it, where the claim's check of other policies no longer looks: the controller then finds the
// name taken and makes no policy. It carries no agora.pool label: the sweeps of pools' and
// dispatches' policies never take it for one of theirs; the pool's sweep deletes it with the
// pool's policy.
func guardPolicyObject(ns, pool, home string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: guardName(pool), Namespace: ns, Labels: map[string]string{labelManagedBy: managedBy, labelHome: home}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelManagedBy: managedBy, labelPool: pool}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// makeGuard makes pool's guard policy, or takes the one standing when it is as agora makes
// it. A policy of that name that is not (the controller's own, made while the template was
// Managed) is refused: no pod of the pool is claimed while it stands.
func (p *Provider) makeGuard(ctx context.Context, want *networkingv1.NetworkPolicy) error {
	_, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Create(ctx, want, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	np, err := p.findPolicy(ctx, want.Name)
	switch {
	case err != nil:
		return err
	case np == nil || np.Labels[labelManagedBy] != managedBy || len(np.OwnerReferences) != 0 || specHash(np.Spec) != specHash(want.Spec):
		return fmt.Errorf("network policy %s is not the one agora holds its name with (it may be agent-sandbox's Managed policy, admitting public egress)", want.Name)
	}
	return nil
}

// deleteGuard deletes pool's guard policy, when it is agora's.
func (p *Provider) deleteGuard(ctx context.Context, pool string) error {
	np, err := p.findPolicy(ctx, guardName(pool))
	if err != nil || np == nil || np.Labels[labelManagedBy] != managedBy || len(np.OwnerReferences) != 0 {
		return err
	}
	uid := np.UID
	err = p.client.NetworkingV1().NetworkPolicies(p.ns).Delete(ctx, np.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete network policy %s: %w", np.Name, err)
	}
	return nil
}
