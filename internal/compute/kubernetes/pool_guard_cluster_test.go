package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// Attack: a neighbour who may edit SandboxTemplates (and no NetworkPolicy) turns agora's pool
// template to networkPolicyManagement: Managed after a dispatch claimed a pod of it, where the
// claim's check of other policies no longer looks. agent-sandbox's controller would then make
// the template's own policy, which selects every pod made from the template, the claimed one
// running the dispatch included, and admits egress to every public address. The pool's guard
// policy holds that policy's name: the controller refuses to make it, and no policy but the
// pool's admits traffic to the claimed pod. Without the guard the controller's policy selects
// the pod within a second of the edit and this test fails.
func TestAgentSandboxPool_AttackTemplateManagedAfterClaim(t *testing.T) {
	t.Parallel()
	g, p, admin, cs := poolSetup(t)
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	p.testOnlyPodMeta = failWith(0, "1h")
	tag := "managed-after-claim"
	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", tag), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pl.Delete(context.Background())
		p.deletePolicy(pl.Name, pl.npUID)
		p.deleteGuard(context.Background(), pl.Name)
	})
	pods := enrolPods(t, g, cs, readyPoolPods(t, admin, pl.Name, 1, nil))
	id := clusterID("POOLMANAGED")
	h, err := pl.Claim(t.Context(), poolSpec(t, id, tag), g.slots.BindPod)
	if err != nil {
		t.Fatal(err)
	}
	cancelAtEnd(t, p, h)
	claimed := handedTo(t, pods, id)

	if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(t.Context(), pl.Name, types.MergePatchType,
		[]byte(`{"spec":{"networkPolicyManagement":"Managed"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("the neighbour's edit: %v", err)
	}
	// The controller reconciles the edited template: it either says it refuses the name the
	// guard holds, or makes its policy, which then selects the claimed pod.
	refused := `refusing to update NetworkPolicy \"` + guardName(pl.Name) + `\"`
	var pod *corev1.Pod
	agoratest.Eventually(t, 2*time.Minute, "the controller to reconcile the Managed template", func() error {
		pod, err = admin.client.CoreV1().Pods(p.ns).Get(t.Context(), claimed.pod.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			t.Fatalf("the claimed pod: %v", err)
		case strings.Contains(c.AgentSandboxLog(), refused) || strings.Contains(c.AgentSandboxLog(), strings.ReplaceAll(refused, `\"`, `"`)):
			return nil
		case p.checkOtherPolicies(t.Context(), pl.npUID, pod.Labels) != nil:
			return nil
		}
		return errors.New("not yet")
	})
	if pod.UID != claimed.pod.UID {
		t.Fatalf("the claimed pod was replaced (%s, was %s)", pod.UID, claimed.pod.UID)
	}
	if err := p.checkOtherPolicies(t.Context(), pl.npUID, pod.Labels); err != nil {
		t.Errorf("the claimed pod runs its dispatch under another policy that admits traffic: %v", err)
	}
	guard, err := p.findPolicy(t.Context(), guardName(pl.Name))
	if err != nil || guard == nil || len(guard.OwnerReferences) != 0 || len(guard.Spec.Ingress)+len(guard.Spec.Egress) != 0 {
		t.Errorf("the guard policy after the edit = %+v, %v; want agora's, admitting nothing", guard, err)
	}
}
