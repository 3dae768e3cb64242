package k8stest_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deployDocs decodes each document of deploy/kubernetes/NAME, by kind.
func deployDocs(t *testing.T, name string) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../deploy/kubernetes/" + name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		k, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		out[k+"/"+meta["name"].(string)] = obj
	}
	return out
}

// dig walks obj by keys (a string for a map, an int for a list), nil when a step is absent.
func dig(obj any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := obj.(map[string]any)
			obj = m[k]
		case int:
			l, _ := obj.([]any)
			if k >= len(l) {
				return nil
			}
			obj = l[k]
		}
	}
	return obj
}

// TestRedTeam35_DeployServePodSurface: the serve pod as deploy/kubernetes writes it. Pod
// Security "restricted" (TestRedTeam35_DeployPodSecurity) does not check what a dispatch pod
// can reach in it, so the attacks here are an edit that would widen that silently: a second
// port or a listener flag (web, metrics, MCP) beside the gateway, a volume other than its
// claim, its ConfigMap (read-only) and /tmp, a writable root filesystem, or a recursive
// fsGroup walk at each start (which adds group bits to the home and its keys).
func TestRedTeam35_DeployServePodSurface(t *testing.T) {
	dep := deployDocs(t, "deployment.yaml")["Deployment/agora"]
	pod := dig(dep, "spec", "template", "spec")
	if pod == nil {
		t.Fatal("deployment.yaml: no Deployment agora with a pod template")
	}
	if got := dig(pod, "securityContext", "fsGroupChangePolicy"); got != "OnRootMismatch" {
		t.Errorf("fsGroupChangePolicy %v: the kubelet would walk the home at each start", got)
	}
	if uid, _ := dig(pod, "securityContext", "runAsUser").(int); uid == 0 || dig(pod, "securityContext", "runAsNonRoot") != true {
		t.Errorf("the serve pod may run as root: %v", dig(pod, "securityContext"))
	}
	for _, k := range []string{"hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "initContainers", "ephemeralContainers"} {
		if dig(pod, k) != nil {
			t.Errorf("the serve pod sets %s", k)
		}
	}
	for i, v := range dig(pod, "volumes").([]any) {
		vm := v.(map[string]any)
		if vm["persistentVolumeClaim"] == nil && vm["configMap"] == nil && vm["emptyDir"] == nil {
			t.Errorf("volume %d is neither the claim, the ConfigMap nor an emptyDir: %v", i, vm)
		}
	}
	// serve (the gateway, the web view, the metrics listener) and agora mcp beside it on
	// the home, and nothing else (TestDeploySurfaces_Deployment checks what each serves).
	containers := dig(pod, "containers").([]any)
	if len(containers) != 2 || dig(containers[0], "name") != "agora" || dig(containers[1], "name") != "mcp" {
		t.Fatalf("%d containers in the serve pod, want agora and mcp", len(containers))
	}
	for _, c := range containers {
		sc := dig(c, "securityContext")
		if dig(sc, "readOnlyRootFilesystem") != true || dig(sc, "allowPrivilegeEscalation") != false ||
			!slices.Equal(dig(sc, "capabilities", "drop").([]any), []any{"ALL"}) || dig(sc, "capabilities", "add") != nil {
			t.Errorf("the %v container's securityContext is wider: %v", dig(c, "name"), sc)
		}
		for _, m := range dig(c, "volumeMounts").([]any) {
			if dig(m, "name") == "config" && dig(m, "readOnly") != true {
				t.Errorf("the ConfigMap is mounted writable: %v", m)
			}
		}
	}
	checkOnlyListeners(t, "deployment.yaml", containers)
	if svc := deployDocs(t, "deployment.yaml")["Service/agora-gateway-vip"]; len(dig(svc, "spec", "ports").([]any)) != 1 ||
		dig(svc, "spec", "type") != "ClusterIP" || dig(svc, "spec", "selector", "app") != "agora" {
		t.Errorf("the gateway Service is not a ClusterIP publishing the gateway alone of serve's pods: %v", dig(svc, "spec"))
	}
	// The Jobs admit serve's pods by namespace AND label: a peer without labels would open a
	// Job's egress to every pod of namespace agora.
	if cfg := dig(deployDocs(t, "config.yaml")["ConfigMap/agora-config"], "data", "agora.yaml").(string); !strings.Contains(cfg, "gateway_peer: {namespace: agora, pods: {app: agora}}") {
		t.Errorf("the target names no exact gateway peer:\n%s", cfg)
	}

	// The namespace of the dispatches denies everything to a pod no per-dispatch policy selects.
	np := deployDocs(t, "namespaces.yaml")["NetworkPolicy/default-deny"]
	if sel := dig(np, "spec", "podSelector"); sel == nil || len(sel.(map[string]any)) != 0 ||
		!slices.Equal(dig(np, "spec", "policyTypes").([]any), []any{"Ingress", "Egress"}) ||
		dig(np, "spec", "ingress") != nil || dig(np, "spec", "egress") != nil {
		t.Errorf("agents' default-deny admits something: %v", dig(np, "spec"))
	}
	for _, ns := range []string{"Namespace/agora", "Namespace/agents"} {
		labels := dig(deployDocs(t, "namespaces.yaml")[ns], "metadata", "labels")
		if dig(labels, "pod-security.kubernetes.io/enforce") != "restricted" {
			t.Errorf("%s does not enforce Pod Security restricted: %v", ns, labels)
		}
		if v := dig(labels, "pod-security.kubernetes.io/enforce-version"); v != nil && v != "latest" {
			t.Errorf("%s pins restricted to %v, an older, narrower rule set", ns, v)
		}
	}
}

// checkOnlyListeners: serve's pod exposes the gateway (8443), the web view (8080), the metrics
// listener (9090) and MCP (8765, its own container) and nothing else, and serve's and agora
// mcp's command lines carry no flag beyond the ones those listeners need: an edit that opens
// another listener, or turns a check off, fails here.
func checkOnlyListeners(t *testing.T, file string, containers []any) {
	t.Helper()
	want := map[string][]string{"agora": {"gateway:8443", "web:8080", "metrics:9090"}, "mcp": {"mcp:8765"}}
	flags := map[string][]string{
		"agora": {"--gateway", "--http", "--allow-host", "--metrics", "--metrics-allow-remote", "--metrics-allow-host"},
		"mcp":   {"--http", "--ceiling", "--allow-host"},
	}
	for _, c := range containers {
		name := dig(c, "name").(string)
		var ports []string
		for _, p := range dig(c, "ports").([]any) {
			ports = append(ports, fmt.Sprintf("%v:%v", dig(p, "name"), dig(p, "containerPort")))
		}
		if !slices.Equal(ports, want[name]) {
			t.Errorf("%s: the %s container exposes %v, want %v", file, name, ports, want[name])
		}
		var args []string
		for _, k := range []string{"command", "args"} {
			if l, ok := dig(c, k).([]any); ok {
				for _, a := range l {
					args = append(args, fmt.Sprint(a))
				}
			}
		}
		for _, a := range args {
			for _, f := range strings.Fields(a) {
				if strings.HasPrefix(f, "--") && !slices.Contains(flags[name], strings.Trim(f, `"`)) {
					t.Errorf("%s: the %s container's command line has %s", file, name, f)
				}
			}
		}
	}
}
