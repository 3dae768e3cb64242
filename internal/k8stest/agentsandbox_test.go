package k8stest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// TestAgentSandboxClaim: with Options.AgentSandbox the real controller reconciles the real
// CRDs: a SandboxClaim against a SandboxWarmPool of one replica gets the pool's pod (already
// Running before the claim existed), with the template's hardened spec, and the pool makes a
// new one. Fails when the CRDs are not installed (404 on create) or no controller runs (the
// claim is never bound).
func TestAgentSandboxClaim(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/" + c.Namespace
	tmpl := map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": "k8stest-tmpl"},
		"spec": map[string]any{
			"networkPolicyManagement": "Unmanaged",
			"podTemplate": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"k8stest": "sandbox"}},
				"spec":     hardenedPodSpec(),
			},
		},
	}
	if err := c.Do(ctx, http.MethodPost, ns+"/sandboxtemplates", tmpl, nil); err != nil {
		t.Fatalf("create SandboxTemplate: %v", err)
	}
	pool := map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": "k8stest-pool"},
		"spec":     map[string]any{"replicas": 1, "sandboxTemplateRef": map[string]string{"name": "k8stest-tmpl"}},
	}
	if err := c.Do(ctx, http.MethodPost, ns+"/sandboxwarmpools", pool, nil); err != nil {
		t.Fatalf("create SandboxWarmPool: %v", err)
	}
	ready := func(obj map[string]any) (bool, error) {
		st, _ := obj["status"].(map[string]any)
		n, _ := st["readyReplicas"].(float64)
		return n >= 1, nil
	}
	if err := c.Wait(ctx, ns+"/sandboxwarmpools/k8stest-pool", ready); err != nil {
		t.Fatalf("the warm pool never had a ready sandbox: %v\ncontroller log:\n%s", err, c.AgentSandboxLog())
	}
	claim := map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": "k8stest-claim"},
		"spec":     map[string]any{"warmPoolRef": map[string]string{"name": "k8stest-pool"}},
	}
	if err := c.Do(ctx, http.MethodPost, ns+"/sandboxclaims", claim, nil); err != nil {
		t.Fatalf("create SandboxClaim: %v", err)
	}
	var sandbox string
	bound := func(obj map[string]any) (bool, error) {
		st, _ := obj["status"].(map[string]any)
		sb, _ := st["sandbox"].(map[string]any)
		sandbox, _ = sb["name"].(string)
		return sandbox != "", nil
	}
	if err := c.Wait(ctx, ns+"/sandboxclaims/k8stest-claim", bound); err != nil {
		t.Fatalf("the claim was never bound to a sandbox: %v\ncontroller log:\n%s", err, c.AgentSandboxLog())
	}
	var sb struct {
		Metadata struct {
			Annotations map[string]string
		}
	}
	path := fmt.Sprintf("/apis/agents.x-k8s.io/v1beta1/namespaces/%s/sandboxes/%s", c.Namespace, sandbox)
	if err := c.Do(ctx, http.MethodGet, path, nil, &sb); err != nil {
		t.Fatal(err)
	}
	podName := sb.Metadata.Annotations["agents.x-k8s.io/pod-name"]
	if podName == "" {
		podName = sandbox
	}
	var pod struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct {
			AutomountServiceAccountToken *bool
			Containers                   []struct {
				SecurityContext struct{ ReadOnlyRootFilesystem *bool }
			}
		}
		Status struct{ Phase string }
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+c.Namespace+"/pods/"+podName, nil, &pod); err != nil {
		t.Fatalf("the claimed sandbox's pod %q: %v", podName, err)
	}
	if pod.Metadata.Labels["k8stest"] != "sandbox" || pod.Status.Phase != "Running" {
		t.Errorf("claimed pod: labels %v phase %q, want the template's label and Running", pod.Metadata.Labels, pod.Status.Phase)
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a ||
		len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem == nil ||
		!*pod.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("claimed pod lost the template's hardening: %+v", pod.Spec)
	}
}
