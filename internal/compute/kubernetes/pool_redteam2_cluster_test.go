package kubernetes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Red team round 2 (#30): attacks on the pool's enrolment and claim binding on the real control
// plane with agent-sandbox's real controller, by someone who did not build them.

// Attack: someone who may create pods in the namespace (not agora) makes a pod that looks like
// a pool pod: the pool's labels, its ServiceAccount, the gateway's projected token, and an
// ownerReference naming a Sandbox the pool holds as its controller (the apiserver checks no
// ownerReference of a pod made without blockOwnerDeletion). Its kubelet-minted token is bound
// to it, so the TokenReview names it. It must not enrol: it is not the pod of that Sandbox
// (agent-sandbox names a Sandbox's pod after it). Before the fix it enrolled, once per such pod:
// a slot, a marker and a held file of the gateway's each, as many as the attacker made pods.
// The pool's real pod still enrols afterwards.
func TestAgentSandboxPool_AttackLookalikePodNeverEnrols(t *testing.T) {
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", "lookalike"), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	real := readyPoolPods(t, admin, pl.Name, 1, nil)[0]
	fake := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: real.Name + "-lookalike", Namespace: real.Namespace,
		Labels: real.Labels, Annotations: real.Annotations, OwnerReferences: real.OwnerReferences,
	}, Spec: *real.Spec.DeepCopy()}
	for i := range fake.OwnerReferences {
		fake.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	made, err := admin.client.CoreV1().Pods(real.Namespace).Create(t.Context(), fake, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("make the lookalike pod: %v", err)
	}
	t.Cleanup(func() {
		admin.client.CoreV1().Pods(made.Namespace).Delete(context.Background(), made.Name, metav1.DeleteOptions{})
	})
	if ref, ok := controllerRef(made.OwnerReferences); !ok || ref.Kind != "Sandbox" || ref.Name != real.Name {
		t.Fatalf("the lookalike pod's controller is %+v, want the pool pod's Sandbox", ref)
	}
	if code := enrolCode(t, g, mintPodToken(t, cs, made, PoolAudience(testHome))); code != 401 {
		t.Errorf("a lookalike pod whose controller is a Sandbox of the pool enrolled: %d, want 401", code)
	}
	if code := enrolCode(t, g, mintPodToken(t, cs, &real, PoolAudience(testHome))); code != 200 {
		t.Errorf("the pool's own pod, after the lookalike: %d, want 200", code)
	}
}
