package kubernetes

import (
	"errors"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The attack: the pool's own NetworkPolicy is checked (uid, spec) before a claim, but
// NetworkPolicies add up: a second policy, made while the pod waits, selecting the pool pod's
// own labels and admitting egress anywhere, widens it as much. Pool.Claim asks
// checkOtherPolicies, and such a pod is never claimed (ErrSlotChanged: the dispatch starts
// cold). A policy selecting every agora pod (the operator's, a cold pod's alike) and one that
// admits nothing leave it claimable.
func TestCheckOtherPolicies_PoolPod(t *testing.T) {
	cs := fake.NewClientset()
	p, err := newProvider(testOptions(t, &fakeExporter{}), clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	podLabels := map[string]string{labelManagedBy: managedBy, labelSlot: "agora-pool-x", labelHome: "home"}
	mk := func(name string, sel map[string]string, egress []networkingv1.NetworkPolicyEgressRule) {
		t.Helper()
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      egress,
		}}
		if _, err := cs.NetworkingV1().NetworkPolicies(p.ns).Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The fake gives no object a uid; the pool's own policy is named by one none of these has.
	anywhere := []networkingv1.NetworkPolicyEgressRule{{}}
	mk("operator-dns", map[string]string{labelManagedBy: managedBy}, anywhere)
	mk("deny-only", map[string]string{labelSlot: "agora-pool-x"}, nil)
	if err := p.checkOtherPolicies(t.Context(), "the-pools-own", podLabels); err != nil {
		t.Fatalf("a pool pod under the operator's policy for every agora pod and a deny-only one: %v", err)
	}
	mk("open", map[string]string{labelSlot: "agora-pool-x"}, anywhere)
	if err := p.checkOtherPolicies(t.Context(), "the-pools-own", podLabels); !errors.Is(err, ErrSlotChanged) {
		t.Errorf("a pool pod singled out by a policy admitting egress anywhere: %v, want ErrSlotChanged", err)
	}
}
