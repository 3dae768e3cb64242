package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestAgentSandboxPool_SweepTakesOnlyTheLeftPolicy: a pool's NetworkPolicy outlives
// Pool.Delete (a claimed pod, owned by its claim, may still run a dispatch it confines), and
// SweepPools takes it once nothing of the pool stands. On the real control plane with
// agent-sandbox's real controller, as agora's ServiceAccount under the documented Roles:
//   - a pool whose template stands keeps its policy, and so does a held one (keep);
//   - a deleted pool with a pod of it still running (a claimed pod's stand-in) keeps it;
//   - once that pod is gone the policy is deleted, and another home's left policy is not;
//   - a holder making the pool again between the sweep's delete and its look again (the
//     race with EnsurePool, which takes a standing policy) gets the policy back as it was.
func TestAgentSandboxPool_SweepTakesOnlyTheLeftPolicy(t *testing.T) {
	_, p, admin, _ := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	ctx := t.Context()
	ensure := func(tag, home string, replicas int32) *Pool {
		pl, err := p.EnsurePool(ctx, poolSpec(t, "TEMPLATE", tag), PoolOptions{Home: home, Replicas: replicas, Places: warmPlaces})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pl.Delete(context.Background()); p.deletePolicy(pl.Name, pl.npUID) })
		return pl
	}
	// sweep reports whether it swept any of mine. The shared cluster holds other tests'
	// pools of this home, whose left policies it may rightly take too.
	sweep := func(mine []*Pool, keep ...string) []string {
		t.Helper()
		gone, err := p.SweepPools(ctx, testHome, func(name string) bool { return slices.Contains(keep, name) })
		if err != nil {
			t.Fatalf("SweepPools: %v", err)
		}
		var got []string
		for _, pl := range mine {
			if slices.Contains(gone, pl.Name) {
				got = append(got, pl.Name)
			}
		}
		return got
	}
	hasPolicy := func(pl *Pool) bool {
		t.Helper()
		np, err := p.findPolicy(ctx, pl.Name)
		if err != nil {
			t.Fatal(err)
		}
		return np != nil && np.DeletionTimestamp == nil
	}

	pl := ensure("sweep", testHome, 1)
	other := ensure("sweep-other", "otherhome", 0)
	readyPoolPods(t, admin, pl.Name, 1, nil)
	if gone := sweep([]*Pool{pl, other}); len(gone) != 0 || !hasPolicy(pl) {
		t.Fatalf("a standing pool's policy was swept: %v", gone)
	}

	// A pod of the pool that outlives its template: a claimed pod, owned by its claim.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pl.Name + "-claimed", Namespace: p.ns, Labels: map[string]string{labelPool: pl.Name}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptrTo(true), RunAsUser: ptrTo(int64(65534)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "w", Image: "agora-worker:test", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptrTo(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
	if _, err := admin.client.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Pool{pl, other} {
		if err := d.Delete(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitPoolParts(t, admin, pl.Name, 1)
	if gone := sweep([]*Pool{pl}); len(gone) != 0 || !hasPolicy(pl) {
		t.Fatalf("the policy was swept while a pod of its pool runs: %v", gone)
	}
	if gone := sweep([]*Pool{pl}, pl.Name); len(gone) != 0 || !hasPolicy(pl) {
		t.Fatalf("a held pool's policy was swept: %v", gone)
	}
	if err := admin.client.CoreV1().Pods(p.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
		t.Fatal(err)
	}
	waitPoolParts(t, admin, pl.Name, 0)
	if gone := sweep([]*Pool{pl, other}); !slices.Equal(gone, []string{pl.Name}) || hasPolicy(pl) {
		t.Fatalf("swept %v (policy there: %v), want the left policy of %s deleted", gone, hasPolicy(pl), pl.Name)
	}
	if !hasPolicy(other) {
		t.Errorf("this home's sweep deleted another home's pool policy %s", other.Name)
	}

	// The race: a holder makes the pool's template again right after the delete.
	again := ensure("sweep-race", testHome, 0)
	tmpl, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, again.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.findPolicy(ctx, again.Name)
	if err != nil || want == nil {
		t.Fatalf("the pool's policy: %v, %v", want, err)
	}
	if err := again.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	waitPoolParts(t, admin, again.Name, 0)
	p.testOnlyPoolSwept = func(name string) {
		if name != again.Name {
			return // another test's left policy
		}
		remade := &templateObject{extObject{TypeMeta: tmpl.TypeMeta, Spec: tmpl.Spec,
			ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name, Namespace: tmpl.Namespace, Labels: tmpl.Labels, Annotations: tmpl.Annotations}}}
		if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Create(ctx, remade, metav1.CreateOptions{}); err != nil {
			t.Errorf("make the template again: %v", err)
		}
	}
	if gone := sweep([]*Pool{again}); len(gone) != 0 {
		t.Errorf("swept %v though its pool was made again meanwhile", gone)
	}
	got, err := p.findPolicy(ctx, again.Name)
	if err != nil || got == nil || specHash(got.Spec) != specHash(want.Spec) || got.Labels[labelPool] != again.Name {
		t.Fatalf("after the race the pool's policy is %+v, %v; want it made again as it was", got, err)
	}
	p.testOnlyPoolSwept = nil
	t.Cleanup(func() { p.deletePolicy(got.Name, got.UID) })
}

// waitPoolParts waits until pool's template, warm pool and Sandboxes are gone (the garbage
// collector and agent-sandbox's controller take them after Pool.Delete) and pods of it remain.
func waitPoolParts(t *testing.T, admin *Provider, pool string, pods int) {
	t.Helper()
	ctx := t.Context()
	agoratest.Eventually(t, time.Minute, "pool "+pool+"'s parts to go", func() error {
		_, terr := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Get(ctx, pool, metav1.GetOptions{})
		_, werr := admin.client.ExtensionsV1beta1().SandboxWarmPools(admin.ns).Get(ctx, pool, metav1.GetOptions{})
		l, err := admin.client.CoreV1().Pods(admin.ns).List(ctx, metav1.ListOptions{LabelSelector: labelPool + "=" + pool})
		if err != nil {
			t.Fatal(err)
		}
		sbs, err := admin.client.AgentsV1beta1().Sandboxes(admin.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for i := range sbs.Items {
			if sbs.Items[i].Spec.PodTemplate.Metadata.Labels[labelPool] == pool {
				left++
			}
		}
		if apierrors.IsNotFound(terr) && apierrors.IsNotFound(werr) && left == 0 && len(l.Items) == pods {
			return nil
		}
		return fmt.Errorf("template %v, warm pool %v, %d sandboxes, %d pods (want %d)", terr, werr, left, len(l.Items), pods)
	})
}
