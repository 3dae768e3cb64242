package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestCluster_RuntimeClassChecked: a target whose runtime_class the cluster lacks is refused
// at Start, saying so, before anything is made or exported (without the check its Job's pod
// is refused by the apiserver, the Job controller retries for ever, and the dispatch waits
// out its timeout); one the cluster has starts as before.
func TestCluster_RuntimeClassChecked(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.Do(ctx, http.MethodPost, "/apis/node.k8s.io/v1/runtimeclasses", map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": "gvisor"}, "handler": "runsc",
	}, nil); err != nil && !isConflict(err) {
		t.Fatal(err)
	}
	for _, tc := range []struct{ class, wantErr string }{
		{"no-such-class", `runtime_class "no-such-class": the cluster has no RuntimeClass of that name`},
		{"gvisor", ""},
	} {
		t.Run(tc.class, func(t *testing.T) {
			exp := &fakeExporter{}
			o := testOptions(t, exp)
			o.Kubeconfig, o.Namespace, o.RuntimeClass = c.Kubeconfig, c.Namespace, tc.class
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			nodeSchedulable(t, p)
			id := clusterID("RC")
			h, err := p.Start(ctx, testSpec(id))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("start with RuntimeClass %q: %v", tc.class, err)
				}
				if exit := waitTimeout(t, h, 3*time.Minute); exit.Code != 0 || !strings.HasSuffix(exit.Isolation, "+runtimeclass") {
					t.Errorf("exit %+v, want code 0 and +runtimeclass", exit)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("start: %v, want %q", err, tc.wantErr)
			}
			if _, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, objectName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a Job was made for the refused start: %v", err)
			}
			if pols, err := p.client.NetworkingV1().NetworkPolicies(p.ns).List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			} else {
				for _, np := range pols.Items {
					if np.Name == objectName(id) {
						t.Errorf("a NetworkPolicy was made for the refused start")
					}
				}
			}
			if exp.exports != 0 {
				t.Errorf("%d exports to the gateway for the refused start", exp.exports)
			}
		})
	}
}

type fakeRuntimeClasses struct {
	clusterAPI
	err error
}

func (f fakeRuntimeClasses) runtimeClassExists(context.Context, string) error { return f.err }

// TestCheckRuntimeClass_OnlyNotFoundRefuses: an account that may not read RuntimeClasses (the
// namespaced Role alone answers 403), or an apiserver that does not answer, is no reason to
// refuse: only the cluster's 404 is.
func TestCheckRuntimeClass_OnlyNotFoundRefuses(t *testing.T) {
	gr := schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}
	for name, tc := range map[string]struct {
		class  string
		err    error
		refuse bool
	}{
		"not found":       {"gvisor", apierrors.NewNotFound(gr, "gvisor"), true},
		"forbidden":       {"gvisor", apierrors.NewForbidden(gr, "gvisor", errors.New("no ClusterRole")), false},
		"unreachable":     {"gvisor", errors.New("dial tcp: connection refused"), false},
		"exists":          {"gvisor", nil, false},
		"no runtimeclass": {"", apierrors.NewNotFound(gr, ""), false},
	} {
		t.Run(name, func(t *testing.T) {
			p := &Provider{client: fakeRuntimeClasses{err: tc.err}, opts: Options{RuntimeClass: tc.class}}
			if err := p.checkRuntimeClass(t.Context()); (err != nil) != tc.refuse {
				t.Errorf("checkRuntimeClass: %v, want refused %v", err, tc.refuse)
			}
		})
	}
}

// TestProbeRuntimeClass_UnderDocumentedRoles: doctor's check, as the admin and as agora's
// account. Under the namespaced Role alone (examples/kubernetes/rbac.yaml) a RuntimeClass
// cannot be read: the probe says "not checked" instead of failing, and so does Start (it goes
// on). With the read-only ClusterRole docs/providers-k8s.md shows, the account sees a missing
// class, and Start refuses it.
func TestProbeRuntimeClass_UnderDocumentedRoles(t *testing.T) {
	_, c := clusterProvider(t, &fakeExporter{})
	ctx := t.Context()
	if err := c.Do(ctx, http.MethodPost, "/apis/node.k8s.io/v1/runtimeclasses", map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": "gvisor"}, "handler": "runsc",
	}, nil); err != nil && !isConflict(err) {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../../../examples/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyYAML(ctx, []byte(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+c.Namespace))); err != nil && !alreadyApplied(err) {
		t.Fatalf("apply the documented Role: %v", err)
	}
	sa, err := c.ServiceAccountKubeconfig(ctx, "agora")
	if err != nil {
		t.Fatal(err)
	}
	probe := func(kubeconfig, class string) (bool, error) { return ProbeRuntimeClass(ctx, kubeconfig, "", class) }
	if ok, err := probe(c.Kubeconfig, "gvisor"); !ok || err != nil {
		t.Errorf("admin, existing class: checked %v, %v", ok, err)
	}
	if ok, err := probe(c.Kubeconfig, "no-such-class"); !ok || err == nil || !strings.Contains(err.Error(), "has no RuntimeClass") {
		t.Errorf("admin, missing class: checked %v, %v", ok, err)
	}
	if ok, err := probe(sa, "no-such-class"); ok || err != nil {
		t.Errorf("Role alone, missing class: checked %v, %v; want not checked, no error", ok, err)
	}
	o := testOptions(t, &fakeExporter{})
	o.Kubeconfig, o.Namespace, o.RuntimeClass = sa, c.Namespace, "no-such-class"
	roleOnly, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := roleOnly.checkRuntimeClass(ctx); err != nil {
		t.Errorf("Start's check under the Role alone refuses: %v", err)
	}

	// The ClusterRole and its binding of docs/providers-k8s.md, as JSON.
	for path, obj := range map[string]map[string]any{
		"/apis/rbac.authorization.k8s.io/v1/clusterroles": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
			"metadata": map[string]any{"name": "agora-runtimeclasses"},
			"rules":    []any{map[string]any{"apiGroups": []string{"node.k8s.io"}, "resources": []string{"runtimeclasses"}, "verbs": []string{"get"}}}},
		"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
			"metadata": map[string]any{"name": "agora-runtimeclasses"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "agora", "namespace": c.Namespace}},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "agora-runtimeclasses"}},
	} {
		if err := c.Do(ctx, http.MethodPost, path, obj, nil); err != nil && !isConflict(err) {
			t.Fatal(err)
		}
	}
	// RBAC takes effect within moments of the binding.
	var missing error
	agoratest.Eventually(t, 30*time.Second, "the bound ClusterRole to read RuntimeClasses", func() error {
		ok, err := probe(sa, "no-such-class")
		if !ok {
			return fmt.Errorf("not checked: %v", err)
		}
		missing = err
		return nil
	})
	if missing == nil || !strings.Contains(missing.Error(), "has no RuntimeClass") {
		t.Errorf("ClusterRole bound, missing class: %v", missing)
	}
	if ok, err := probe(sa, "gvisor"); !ok || err != nil {
		t.Errorf("ClusterRole bound, existing class: checked %v, %v", ok, err)
	}
	if err := roleOnly.checkRuntimeClass(ctx); err == nil {
		t.Error("Start's check with the ClusterRole bound lets a missing class through")
	}
}
