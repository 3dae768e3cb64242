package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// These tests run kubernetes-sigs/agent-sandbox's real controller and CRDs in the
// shared control plane with kwok: the groundwork of the agent-sandbox backend, which puts the
// dispatch's pod spec, exactly as a Job's, into a SandboxTemplate and claims it.

const (
	asExtensions = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/"
	asCore       = "/apis/agents.x-k8s.io/v1beta1/namespaces/"
)

// TestAgentSandbox_TemplateKeepsJobHardening puts the pod spec of the Job agora would make
// (restricted security contexts, no service-account token, the uid of the dispatch, limits,
// the digest-pinned images, the gVisor RuntimeClass, the pinned gateway in /etc/hosts, the
// dispatch's labels its NetworkPolicy selects) into a SandboxTemplate, claims it cold, and
// checks that every field agora set is in the pod the controller made, unchanged: the
// controller adds (its labels, the apiserver's defaults) but may drop or change nothing.
// With networkPolicyManagement Unmanaged it makes no NetworkPolicy of its own (its managed
// default admits egress to every public address, and policies add up: agora's gateway-only
// policy would stop confining the pod).
func TestAgentSandbox_TemplateKeepsJobHardening(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.Do(ctx, http.MethodPost, "/apis/node.k8s.io/v1/runtimeclasses", map[string]any{
		"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
		"metadata": map[string]any{"name": "gvisor"}, "handler": "runsc",
	}, nil); err != nil && !isConflict(err) {
		t.Fatal(err)
	}
	o := testOptions(t, &fakeExporter{})
	o.Kubeconfig, o.Namespace = c.Kubeconfig, c.Namespace
	o.RuntimeClass = "gvisor"
	o.GatewayURL = "https://gateway.agora.test:8443"
	o.Resolve = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("10.250.0.1")}, nil
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := p.resolveGateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := clusterID("as")
	name := objectName(id)
	job := p.jobObject(jobInput{name: name, id: id, spec: testSpec(id), env: []envVar{{"HOME", "/tmp"}},
		mounts: testMounts(), gateway: gw})
	want := toMap(t, job.Spec.Template.Spec)
	// Things kwok's node does not need but the comparison must keep: nothing is removed.
	tmpl := map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "labels": labels(id)},
		"spec": map[string]any{
			"networkPolicyManagement": "Unmanaged",
			"podTemplate": map[string]any{
				"metadata": map[string]any{"labels": job.Spec.Template.Labels},
				"spec":     want,
			},
		},
	}
	ns := asExtensions + c.Namespace
	if err := c.Do(ctx, http.MethodPost, ns+"/sandboxtemplates", tmpl, nil); err != nil {
		t.Fatalf("create SandboxTemplate: %v", err)
	}
	pool := map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name, "labels": labels(id)},
		"spec":     map[string]any{"replicas": 0, "sandboxTemplateRef": map[string]string{"name": name}},
	}
	if err := c.Do(ctx, http.MethodPost, ns+"/sandboxwarmpools", pool, nil); err != nil {
		t.Fatalf("create SandboxWarmPool: %v", err)
	}
	claim := map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "labels": labels(id)},
		"spec":     map[string]any{"warmPoolRef": map[string]string{"name": name}},
	}
	if err := c.Do(ctx, http.MethodPost, ns+"/sandboxclaims", claim, nil); err != nil {
		t.Fatalf("create SandboxClaim: %v", err)
	}
	pod := claimedPod(ctx, t, c, name)

	spec, _ := pod["spec"].(map[string]any)
	if diffs := missingFrom(want, spec, "spec"); len(diffs) > 0 {
		t.Errorf("the claimed pod lost or changed what the Job's pod spec sets:\n%v", diffs)
	}
	meta, _ := pod["metadata"].(map[string]any)
	podLabels, _ := meta["labels"].(map[string]any)
	for k, v := range labels(id) {
		if podLabels[k] != v {
			t.Errorf("pod label %s=%v, want %q (the dispatch's NetworkPolicy selects it)", k, podLabels[k], v)
		}
	}
	var nps struct {
		Items []struct {
			Metadata struct{ Name string }
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/apis/networking.k8s.io/v1/namespaces/"+c.Namespace+"/networkpolicies", nil, &nps); err != nil {
		t.Fatal(err)
	}
	for _, np := range nps.Items {
		t.Errorf("NetworkPolicy %q exists: with networkPolicyManagement Unmanaged the controller must make none", np.Metadata.Name)
	}
}

// claimedPod waits for the claim's sandbox and returns its pod, decoded.
func claimedPod(ctx context.Context, t *testing.T, c *k8stest.Cluster, claim string) map[string]any {
	t.Helper()
	var sandbox string
	err := c.Wait(ctx, asExtensions+c.Namespace+"/sandboxclaims/"+claim, func(obj map[string]any) (bool, error) {
		st, _ := obj["status"].(map[string]any)
		sb, _ := st["sandbox"].(map[string]any)
		sandbox, _ = sb["name"].(string)
		return sandbox != "", nil
	})
	if err != nil {
		t.Fatalf("claim %s never bound: %v\ncontroller log:\n%s", claim, err, c.AgentSandboxLog())
	}
	podName := ""
	err = c.Wait(ctx, asCore+c.Namespace+"/sandboxes/"+sandbox, func(obj map[string]any) (bool, error) {
		meta, _ := obj["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		podName, _ = ann["agents.x-k8s.io/pod-name"].(string)
		return podName != "", nil
	})
	if err != nil {
		podName = sandbox // the controller names the pod after the sandbox when it made it
	}
	var pod map[string]any
	err = c.Wait(ctx, "/api/v1/namespaces/"+c.Namespace+"/pods/"+podName, func(obj map[string]any) (bool, error) {
		pod = obj
		return true, nil
	})
	if err != nil {
		t.Fatalf("sandbox %s has no pod %s: %v\ncontroller log:\n%s", sandbox, podName, err, c.AgentSandboxLog())
	}
	return pod
}

// toMap is v as the apiserver's JSON sees it.
func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// missingFrom lists every leaf of want that got lost or changed in got. Lists compare element
// by element, in order: containers, volumes and env keep agora's order.
func missingFrom(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", path, got)}
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			out = append(out, missingFrom(w[k], g[k], path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d elements %v, got %v", path, len(w), w, got)}
		}
		var out []string
		for i := range w {
			out = append(out, missingFrom(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
		}
		return nil
	}
}

// TestAgentSandbox_ClaimCannotRedirectOrUnconfine is the attack a holder of SandboxClaim
// create rights would try against a template agora made: a claim that injects the gateway's
// URL (the worker would hand its token to another host) or overrides the agora.dispatch label
// (agora's NetworkPolicy would stop selecting the pod) must not get a pod with either. The
// template leaves envVarsInjectionPolicy at its default, Disallowed; the controller allows claim
// labels only under sandbox.users.io and never overriding the template's.
func TestAgentSandbox_ClaimCannotRedirectOrUnconfine(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	o := testOptions(t, &fakeExporter{})
	o.Kubeconfig, o.Namespace = c.Kubeconfig, c.Namespace
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	id := clusterID("asx")
	name := objectName(id)
	job := p.jobObject(jobInput{name: name, id: id, spec: testSpec(id), mounts: testMounts(), gateway: p.gateway})
	ns := asExtensions + c.Namespace
	for _, obj := range []map[string]any{{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "labels": labels(id)},
		"spec": map[string]any{"networkPolicyManagement": "Unmanaged", "podTemplate": map[string]any{
			"metadata": map[string]any{"labels": job.Spec.Template.Labels},
			"spec":     toMap(t, job.Spec.Template.Spec),
		}},
	}, {
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name, "labels": labels(id)},
		"spec":     map[string]any{"replicas": 0, "sandboxTemplateRef": map[string]string{"name": name}},
	}} {
		kind := strings.ToLower(obj["kind"].(string)) + "s"
		if err := c.Do(ctx, http.MethodPost, ns+"/"+kind, obj, nil); err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
	}
	evil := "https://203.0.113.9:443"
	attacks := map[string]map[string]any{
		"env": {"warmPoolRef": map[string]string{"name": name},
			"env": []map[string]string{{"name": "AGORA_GATEWAY_URL", "value": evil, "containerName": "worker"}}},
		"label": {"warmPoolRef": map[string]string{"name": name},
			"additionalPodMetadata": map[string]any{"labels": map[string]string{labelDispatch: "someone-else"}}},
		"domain-label": {"warmPoolRef": map[string]string{"name": name},
			"additionalPodMetadata": map[string]any{"labels": map[string]string{"agora.dev/dispatch": "x"}}},
	}
	for attack, spec := range attacks {
		claim := name + "-" + attack
		if err := c.Do(ctx, http.MethodPost, ns+"/sandboxclaims", map[string]any{
			"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
			"metadata": map[string]any{"name": claim}, "spec": spec,
		}, nil); err != nil {
			t.Logf("%s: the apiserver refused the claim: %v", attack, err)
			continue
		}
		// Reconciled: the controller wrote a condition, bound or not.
		var sandbox, why string
		if err := c.Wait(ctx, ns+"/sandboxclaims/"+claim, func(obj map[string]any) (bool, error) {
			st, _ := obj["status"].(map[string]any)
			sb, _ := st["sandbox"].(map[string]any)
			sandbox, _ = sb["name"].(string)
			conds, _ := st["conditions"].([]any)
			if len(conds) > 0 {
				why = fmt.Sprint(conds)
			}
			return sandbox != "" || len(conds) > 0, nil
		}); err != nil {
			t.Fatalf("%s: claim never reconciled: %v\n%s", attack, err, c.AgentSandboxLog())
		}
		t.Logf("%s: sandbox %q, conditions %s", attack, sandbox, why)
		var pods struct {
			Items []struct {
				Metadata struct {
					Name   string
					Labels map[string]string
				}
				Spec struct {
					Containers []struct {
						Name string
						Env  []struct{ Name, Value string }
					}
				}
			}
		}
		if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+c.Namespace+"/pods", nil, &pods); err != nil {
			t.Fatal(err)
		}
		for _, pod := range pods.Items {
			if v, ok := pod.Metadata.Labels[labelDispatch]; ok && v != id && strings.HasPrefix(pod.Metadata.Name, name) {
				t.Errorf("%s: pod %s carries %s=%s: agora's NetworkPolicy no longer selects it", attack, pod.Metadata.Name, labelDispatch, v)
			}
			for _, ctr := range pod.Spec.Containers {
				for _, e := range ctr.Env {
					if e.Value == evil {
						t.Errorf("%s: pod %s container %s has %s=%s injected by a claim", attack, pod.Metadata.Name, ctr.Name, e.Name, e.Value)
					}
				}
			}
		}
	}
}

func isConflict(err error) bool {
	se, ok := err.(*k8stest.StatusError)
	return ok && se.Code == http.StatusConflict
}
