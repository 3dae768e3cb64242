package kubernetes

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAgentSandboxPool_OpenFindsOnlyAsMade: a supervisor that did not make the pool (the
// holder did, warm_pool) opens it read-only by its own dispatch's shape. On the real
// control plane with agent-sandbox's real controller, as agora's ServiceAccount under the
// documented Role: a dispatch of the pool's shape finds the holder's pool (same name, ready
// count read); one of another shape finds none (ErrNoPool); and the attacks a supervisor's
// trust in a pool it did not make opens: a template weakened after EnsurePool (a Managed
// network policy, env injection allowed) and a widened pool policy are refused
// (ErrSlotChanged), so no claim is ever made from them.
func TestAgentSandboxPool_OpenFindsOnlyAsMade(t *testing.T) {
	_, p, admin, _ := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	ensure := func(t *testing.T, tag string) (*Pool, func(id string) (*Pool, error)) {
		spec := poolSpec(t, "TEMPLATE", tag)
		pl, err := p.EnsurePool(t.Context(), spec, PoolOptions{Home: testHome, Replicas: 0, Places: warmPlaces})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pl.Delete(context.Background()); p.deletePolicy(pl.Name, pl.npUID) })
		open := func(id string) (*Pool, error) {
			return p.OpenPool(t.Context(), poolSpec(t, clusterID(id), tag), PoolOptions{Home: testHome, Replicas: 0, Places: warmPlaces})
		}
		return pl, open
	}

	pl, open := ensure(t, "open")
	got, err := open("POOLOPEN")
	if err != nil || got.Name != pl.Name || got.tmplUID != pl.tmplUID || got.npUID != pl.npUID {
		t.Fatalf("OpenPool of the pool's shape = %+v, %v; want the pool %s as made", got, err, pl.Name)
	}
	if n, err := got.Ready(t.Context()); err != nil || n != 0 {
		t.Errorf("Ready of a pool of 0 = %d, %v", n, err)
	}
	if _, err := p.OpenPool(t.Context(), poolSpec(t, clusterID("POOLOTHER"), "another-shape"), PoolOptions{Home: testHome, Places: warmPlaces}); !errors.Is(err, ErrNoPool) {
		t.Errorf("OpenPool of another shape = %v, want ErrNoPool", err)
	}
	if _, err := p.OpenPool(t.Context(), poolSpec(t, clusterID("POOLHOME"), "open"), PoolOptions{Home: "otherhome", Places: warmPlaces}); !errors.Is(err, ErrNoPool) {
		t.Errorf("OpenPool of another home = %v, want ErrNoPool", err)
	}

	for name, patch := range map[string]func(pl *Pool) error{
		"managed": func(pl *Pool) error {
			_, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(t.Context(), pl.Name, "application/merge-patch+json",
				[]byte(`{"spec":{"networkPolicyManagement":"Managed"}}`), metav1.PatchOptions{})
			return err
		},
		"envinject": func(pl *Pool) error {
			_, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Patch(t.Context(), pl.Name, "application/merge-patch+json",
				[]byte(`{"spec":{"envVarsInjectionPolicy":"Overrides"}}`), metav1.PatchOptions{})
			return err
		},
		"widened": func(pl *Pool) error {
			_, err := admin.client.NetworkingV1().NetworkPolicies(p.ns).Patch(t.Context(), pl.Name, "application/merge-patch+json",
				[]byte(`{"spec":{"egress":[{}]}}`), metav1.PatchOptions{})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			pl, open := ensure(t, "weak-"+name)
			if _, err := open("POOLBEFORE"); err != nil {
				t.Fatalf("OpenPool before the change: %v", err)
			}
			if err := patch(pl); err != nil {
				t.Fatal(err)
			}
			if got, err := open("POOLAFTER"); !errors.Is(err, ErrSlotChanged) {
				t.Fatalf("OpenPool of a pool changed after EnsurePool = %+v, %v; want ErrSlotChanged", got, err)
			}
		})
	}
}
