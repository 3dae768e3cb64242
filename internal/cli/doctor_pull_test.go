package cli

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestDoctor_PullSecretsOnRealControlPlane: doctor's probes of kubernetes targets (the engine
// probe of a jobs target, the agent-sandbox probe of that backend's) on a real API server
// report an image pull secret that does not exist and one that is no registry credential,
// by name, with the Secret's data nowhere in what they say; the registry credential passes.
// They also report a runtime_class the cluster lacks.
func TestDoctor_PullSecretsOnRealControlPlane(t *testing.T) {
	// agent-sandbox's CRDs and controller too, so that backend's probe gets past its own check.
	c := k8stest.Start(t, k8stest.Options{AgentSandbox: true})
	const secretValue = "REGISTRY-PASSWORD-MUST-NOT-PRINT"
	for name, typ := range map[string]string{"regcred": "kubernetes.io/dockerconfigjson", "plain": "Opaque"} {
		key := ".dockerconfigjson"
		if typ == "Opaque" {
			key = "password"
		}
		obj := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name}, "type": typ,
			"data": map[string]any{key: base64.StdEncoding.EncodeToString([]byte(`{"auths":{"r.example":{"auth":"` + secretValue + `"}}}`))}}
		if err := c.Do(t.Context(), "POST", "/api/v1/namespaces/"+c.Namespace+"/secrets", obj, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(t.Context(), "POST", "/apis/node.k8s.io/v1/runtimeclasses", map[string]any{"apiVersion": "node.k8s.io/v1",
		"kind": "RuntimeClass", "metadata": map[string]any{"name": "gvisor"}, "handler": "runsc"}, nil); err != nil {
		t.Fatal(err)
	}
	target := func(secrets ...string) config.Target {
		return config.Target{Provider: config.ProviderKubernetes, Remote: config.Remote{
			Kubeconfig: c.Kubeconfig, Namespace: c.Namespace, ImagePullSecrets: secrets}}
	}
	detail, err := probeEngine(t.Context(), target("regcred"))
	if err != nil || !strings.Contains(detail, "image pull secrets regcred exist and are registry credentials") {
		t.Errorf("engine probe of a registry credential = %q, %v", detail, err)
	}
	h := doctorHost()
	for what, probe := range map[string]func(context.Context, config.Target) error{
		"engine": func(ctx context.Context, t config.Target) error { _, err := probeEngine(ctx, t); return err },
		"agent-sandbox": func(ctx context.Context, t config.Target) error {
			_, err := h.AgentSandbox(ctx, t)
			return err
		},
	} {
		if err := probe(t.Context(), target("regcred")); err != nil {
			t.Errorf("%s probe of a registry credential: %v", what, err)
		}
		err := probe(t.Context(), target("regcred", "missing", "plain"))
		if err == nil || !strings.Contains(err.Error(), `"missing" does not exist`) || !strings.Contains(err.Error(), `"plain" in namespace`) {
			t.Errorf("%s probe of a missing and an Opaque pull secret = %v", what, err)
		}
		if err != nil && (strings.Contains(err.Error(), secretValue) || strings.Contains(err.Error(), "regcred")) {
			t.Errorf("%s probe names the good secret or prints a secret's data: %v", what, err)
		}
		// runtime_class: a class the cluster lacks is named; one it has passes.
		missing := target("regcred")
		missing.RuntimeClass = "no-such-class"
		if err := probe(t.Context(), missing); err == nil || !strings.Contains(err.Error(), `runtime_class "no-such-class": the cluster has no RuntimeClass`) {
			t.Errorf("%s probe of a missing runtime_class = %v", what, err)
		}
		present := target("regcred")
		present.RuntimeClass = "gvisor"
		if err := probe(t.Context(), present); err != nil {
			t.Errorf("%s probe of an existing runtime_class: %v", what, err)
		}
	}
	present := target()
	present.RuntimeClass = "gvisor"
	if detail, err := probeEngine(t.Context(), present); err != nil || !strings.Contains(detail, "; RuntimeClass gvisor exists") {
		t.Errorf("engine probe of an existing runtime_class = %q, %v", detail, err)
	}
}
