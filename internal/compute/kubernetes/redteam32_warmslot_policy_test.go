package kubernetes

import (
	"context"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRedTeam32_WarmSlotExtraPolicyNeverClaimed: the slot's own NetworkPolicy is checked
// (uid, spec) before a claim; but NetworkPolicies add up, and a second policy made while the
// slot waits, selecting the slot's own label (agora.slot=<id>, which no cold pod carries) and
// admitting egress anywhere, widens the slot as much: it is never claimed. A policy selecting
// every agora pod (the operator's, a cold pod's alike) and one that admits nothing leave the
// slot claimable. Failed before: Check looked at no other policy and the dispatch was bound.
func TestRedTeam32_WarmSlotExtraPolicyNeverClaimed(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	sl, _ := startSlot(t, p, g)
	extra := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "rt32-open-" + sl.ID, Namespace: p.ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelSlot: sl.ID}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{}}, // anywhere
		},
	}
	if _, err := fullClient(t).NetworkingV1().NetworkPolicies(p.ns).Create(t.Context(), extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fullClient(t).NetworkingV1().NetworkPolicies(p.ns).Delete(context.Background(), extra.Name, metav1.DeleteOptions{}) //nolint:errcheck
	})
	refusedBeforeBind(t, sl)

	// The operator's: a policy for every agora pod (DNS, say) and a deny-only one for this
	// slot: a fresh slot stays claimable under both.
	sl2, _ := startSlot(t, p, g)
	cs := fullClient(t)
	for _, np := range []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "rt32-agora-dns-" + sl2.ID, Namespace: p.ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelManagedBy: managedBy}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "rt32-deny-" + sl2.ID, Namespace: p.ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelSlot: sl2.ID}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress},
		}},
	} {
		if _, err := cs.NetworkingV1().NetworkPolicies(p.ns).Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cs.NetworkingV1().NetworkPolicies(p.ns).Delete(context.Background(), np.Name, metav1.DeleteOptions{}) //nolint:errcheck
		})
	}
	if err := sl2.Check(t.Context()); err != nil {
		t.Errorf("a slot under the operator's policies for every agora pod and a deny-only one: %v", err)
	}
}
