package kubernetes

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// A verifier that takes a pool to be this home's by its labels alone (the current identity's
// or a former one's) enrols the pods of a pool made by someone else with agora's labels. So
// the verifier holds an enrolling pod's pool to the pools agora makes (PoolVerifier.Pools:
// the name, which hashes the home and the shape, and the pod template).

// Attack: someone who may create SandboxTemplates and SandboxWarmPools makes a pool of their
// own that looks like one of this home's (agora's labels, the home's identity, a pool-like
// name, the pool ServiceAccount) but runs a command of theirs. Its pods' tokens of the home's
// audience name pods of a Sandbox that pool holds. They must not enrol: the pool is not one
// agora made. Tried under the former identity and the current one.
func TestRedteam45Pool_LookalikePoolNeverEnrols(t *testing.T) {
	_, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	ctx := t.Context()
	v := PoolVerifier{P: p, Pools: p.MadePools, Home: testHome, Former: []string{formerTestHome}}
	for _, home := range []string{formerTestHome, testHome} {
		real := ensureTestPool(t, p, "rt45-lookpool", home, 0)
		objs := p.mustPoolObjects(t, poolSpec(t, "TEMPLATE", "rt45-lookpool"), PoolOptions{Home: home, Replicas: 1, Places: warmPlaces})
		name := poolPrefix + "rt45look" + home[:8]
		var ts poolTemplateSpec
		if err := json.Unmarshal(objs.tmpl.Spec, &ts); err != nil {
			t.Fatal(err)
		}
		ts.PodTemplate.Metadata.Labels[labelPool] = name
		ts.PodTemplate.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo attacker"}
		tb, _ := json.Marshal(ts)
		tmpl := objs.tmpl
		tmpl.Name, tmpl.Labels, tmpl.Spec = name, rt45Copy(tmpl.Labels), tb
		tmpl.Labels[labelPool] = name
		wp := objs.pool
		pb, _ := json.Marshal(map[string]any{"replicas": 1, "sandboxTemplateRef": map[string]string{"name": name}})
		wp.Name, wp.Labels, wp.Spec = name, rt45Copy(tmpl.Labels), pb
		if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.client.ExtensionsV1beta1().SandboxWarmPools(admin.ns).Create(ctx, wp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			admin.client.ExtensionsV1beta1().SandboxTemplates(admin.ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
			admin.client.ExtensionsV1beta1().SandboxWarmPools(admin.ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
		})
		pod := readyPoolPods(t, admin, name, 1, nil)[0]
		if id, err := v.VerifyPod(ctx, mintPodToken(t, cs, &pod, PoolAudience(home))); err == nil {
			t.Errorf("a pod of a lookalike pool %s labelled with %s (not agora's: pool %s is) enrolled as %+v", name, home, real.Name, id)
		} else {
			t.Logf("the lookalike pool's pod under %s: %v", home, err)
		}
	}
}

// mustPoolObjects is what EnsurePool makes for spec and o.
func (p *Provider) mustPoolObjects(t *testing.T, spec compute.Spec, o PoolOptions) *poolObjects {
	t.Helper()
	spec.ID = ""
	_, objs, err := p.preparePool(t.Context(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
