package k8stest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// helmRelease is one release of the chart on a test cluster, in namespaces of its own so it
// shares the package's kwok cluster with the tests that apply deploy/kubernetes as written.
type helmRelease struct {
	helm, kubeconfig, name string
	agora, agents          string
}

// run runs a helm command of the release, whose records are in its agora namespace, as the
// docs install it (helm makes that namespace, the chart labels it).
func (r helmRelease) run(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	args = append(args, "--kubeconfig", r.kubeconfig, "--namespace", r.agora)
	out, err := runHelm(ctx, r.helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (r helmRelease) values() []string {
	return []string{"--set", "namespaces.agora=" + r.agora, "--set", "namespaces.agents=" + r.agents}
}

// objectUID is obj's metadata.uid at path, "" when it does not exist.
func objectUID(ctx context.Context, t *testing.T, c *k8stest.Cluster, path string) string {
	t.Helper()
	var obj struct{ Metadata struct{ UID string } }
	if err := c.Do(ctx, http.MethodGet, path, nil, &obj); err != nil {
		if k8stest.IsNotFound(err) {
			return ""
		}
		t.Fatal(err)
	}
	return obj.Metadata.UID
}

// servePods lists the release's serve pods that are not being deleted, with their image.
func servePods(ctx context.Context, t *testing.T, c *k8stest.Cluster, ns string) map[string]string {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string
				DeletionTimestamp *string
			}
			Spec struct {
				Containers []struct{ Name, Image string }
			}
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods?labelSelector=app%3Dagora", nil, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.Metadata.DeletionTimestamp != nil {
			continue
		}
		// serve's container; agora mcp beside it runs the same image.
		for _, ctr := range p.Spec.Containers {
			if ctr.Name == "agora" {
				out[p.Metadata.Name] = ctr.Image
			}
		}
	}
	return out
}

// waitOnePod waits until the release's namespace has exactly one serve pod, of image, and
// returns its name.
func waitOnePod(ctx context.Context, t *testing.T, c *k8stest.Cluster, ns, image string) string {
	t.Helper()
	for {
		pods := servePods(ctx, t, c, ns)
		if len(pods) == 1 {
			for name, im := range pods {
				if im == image {
					return name
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("want one serve pod of %s in %s, have %v: %v", image, ns, pods, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestHelmInstallUpgradeUninstall: the chart installed by helm's own code on the real
// control plane (kwok's node runs the pods), with every object landing where the values say;
// `helm upgrade` with a new agora image rolls the Deployment to one pod of it, and an upgrade that changes only agora.yaml rolls it too (serve reads
// it at its start); `helm uninstall` removes serve, its configuration and its RBAC, and keeps
// the home's claim (the same object, uid unchanged), both namespaces and agents' default-deny
// policy; a second `helm install` takes them back.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	helm := helmBin(t)
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	r := helmRelease{helm: helm, kubeconfig: c.Kubeconfig, name: "agora-helm-test", agora: "helm-agora", agents: "helm-agents"}
	// kwok has no storage provisioner: the claim binds to this volume, as to a class's.
	_, pv := homeVolume(t, r.agora, "agora-home")
	pv["metadata"].(map[string]any)["name"] = "k8stest-helm-agora-home"
	if err := c.Apply(ctx, pv); err != nil {
		t.Fatal(err)
	}

	r.run(ctx, t, append([]string{"install", r.name, chartDir, "--create-namespace", "--wait", "--timeout", "2m"}, r.values()...)...)
	for _, ns := range []string{r.agora, r.agents} {
		var obj struct {
			Metadata struct{ Labels map[string]string }
		}
		if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns, nil, &obj); err != nil {
			t.Fatal(err)
		}
		if got := obj.Metadata.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
			t.Errorf("namespace %s enforces Pod Security %q, want restricted", ns, got)
		}
	}
	const first = "registry.example/agora/agora@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	pod1 := waitOnePod(ctx, t, c, r.agora, first)
	var cm struct{ Data map[string]string }
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+r.agora+"/configmaps/agora-config", nil, &cm); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"namespace: " + r.agents, "advertise: \"https://agora-gateway-vip." + r.agora + ".svc.cluster.local:8443\"",
		"gateway_peer: {namespace: " + r.agora + ", pods: {app: agora}}"} {
		if !strings.Contains(cm.Data["agora.yaml"], want) {
			t.Errorf("agora.yaml lacks %q:\n%s", want, cm.Data["agora.yaml"])
		}
	}
	if !saAllowed(ctx, t, c, r.agora, "create", "batch", "jobs", r.agents) || saAllowed(ctx, t, c, r.agora, "create", "batch", "jobs", r.agora) {
		t.Errorf("the release's service account is not bound to its Role in %s alone", r.agents)
	}
	// The apiserver took serve's ingress policy as rendered: serve's pods, from agora's pods
	// in the release's agents namespace, on the gateway's port.
	var np map[string]any
	if err := c.Do(ctx, http.MethodGet, "/apis/networking.k8s.io/v1/namespaces/"+r.agora+"/networkpolicies/agora-serve", nil, &np); err != nil {
		t.Fatalf("serve's ingress policy: %v", err)
	}
	if dig(np, "spec", "podSelector", "matchLabels", "app") != "agora" ||
		dig(np, "spec", "ingress", 0, "from", 0, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name") != r.agents ||
		dig(np, "spec", "ingress", 0, "from", 0, "podSelector", "matchLabels", "app.kubernetes.io/managed-by") != "agora" ||
		fmt.Sprint(dig(np, "spec", "ingress", 0, "ports", 0, "port")) != "8443" || dig(np, "spec", "ingress", 1) != nil {
		t.Errorf("serve's ingress policy as installed: %v", np["spec"])
	}
	claim := "/api/v1/namespaces/" + r.agora + "/persistentvolumeclaims/agora-home"
	claimUID := objectUID(ctx, t, c, claim)

	// A new image rolls the Deployment: one pod, of the new image.
	const second = "registry.example/agora/agora@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	r.run(ctx, t, append([]string{"upgrade", r.name, chartDir, "--wait", "--timeout", "2m", "--set", "image.digest=sha256:" + strings.Repeat("1", 64)}, r.values()...)...)
	pod2 := waitOnePod(ctx, t, c, r.agora, second)
	if pod2 == pod1 {
		t.Errorf("upgrade with a new image left pod %s", pod1)
	}
	// agora.yaml alone changed (the target's pull policy): the pod's config checksum rolls it.
	r.run(ctx, t, append([]string{"upgrade", r.name, chartDir, "--wait", "--timeout", "2m", "--set", "image.digest=sha256:" + strings.Repeat("1", 64), "--set", "target.imagePullPolicy=Always"}, r.values()...)...)
	if pod3 := waitOnePod(ctx, t, c, r.agora, second); pod3 == pod2 {
		t.Errorf("an upgrade changing agora.yaml left pod %s running the old configuration", pod2)
	}

	out := r.run(ctx, t, "uninstall", r.name, "--wait", "--timeout", "2m")
	t.Logf("helm uninstall:\n%s", out)
	for _, gone := range []string{
		"/apis/apps/v1/namespaces/" + r.agora + "/deployments/agora",
		"/api/v1/namespaces/" + r.agora + "/configmaps/agora-config",
		"/api/v1/namespaces/" + r.agora + "/services/agora-gateway-vip",
		"/apis/networking.k8s.io/v1/namespaces/" + r.agora + "/networkpolicies/agora-serve",
		"/api/v1/namespaces/" + r.agora + "/serviceaccounts/agora",
		"/apis/rbac.authorization.k8s.io/v1/namespaces/" + r.agents + "/roles/agora",
		"/apis/rbac.authorization.k8s.io/v1/namespaces/" + r.agents + "/rolebindings/agora",
	} {
		if objectUID(ctx, t, c, gone) != "" {
			t.Errorf("helm uninstall left %s", gone)
		}
	}
	if got := objectUID(ctx, t, c, claim); got != claimUID {
		t.Errorf("helm uninstall did not keep the home's claim (uid %q, was %q)", got, claimUID)
	}
	for _, kept := range []string{
		"/api/v1/namespaces/" + r.agora, "/api/v1/namespaces/" + r.agents,
		"/apis/networking.k8s.io/v1/namespaces/" + r.agents + "/networkpolicies/default-deny",
	} {
		if objectUID(ctx, t, c, kept) == "" {
			t.Errorf("helm uninstall removed %s", kept)
		}
	}

	// Installed again, the release takes the kept objects back: the same home.
	r.run(ctx, t, append([]string{"install", r.name, chartDir, "--create-namespace", "--wait", "--timeout", "2m"}, r.values()...)...)
	waitOnePod(ctx, t, c, r.agora, first)
	if got := objectUID(ctx, t, c, claim); got != claimUID {
		t.Errorf("a second install made a new claim (uid %q, was %q)", got, claimUID)
	}
	r.run(ctx, t, "uninstall", r.name, "--wait", "--timeout", "2m")
}

// saAllowed asks the apiserver's authorizer whether the service account agora of saNS may do
// verb on resource in ns.
func saAllowed(ctx context.Context, t *testing.T, c *k8stest.Cluster, saNS, verb, group, resource, ns string) bool {
	t.Helper()
	return saAllowedNamed(ctx, t, c, saNS, verb, group, resource, "", ns)
}

// saAllowedNamed is saAllowed for the object name (any object when empty).
func saAllowedNamed(ctx context.Context, t *testing.T, c *k8stest.Cluster, saNS, verb, group, resource, name, ns string) bool {
	t.Helper()
	review := map[string]any{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{
			"user":   "system:serviceaccount:" + saNS + ":agora",
			"groups": []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"},
			"resourceAttributes": map[string]any{
				"namespace": ns, "verb": verb, "group": group, "resource": resource, "name": name,
			},
		},
	}
	var out struct {
		Status struct{ Allowed bool } `json:"status"`
	}
	if err := c.Do(ctx, http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", review, &out); err != nil {
		t.Fatal(err)
	}
	return out.Status.Allowed
}

// TestHelmInstallLeader: the chart's two replicas on a Lease, installed by helm on the
// control plane: namespace agora's Pod Security "restricted" admits both StatefulSet pods (the
// init container too), each has a claim of its own, and the service account may make Leases
// and get and update the one Lease by name, and nothing else there: not another Lease, not a
// Secret (the keys', the bucket's), not its own StatefulSet. Uninstall keeps both claims.
// kwok runs no process: the takeover itself is TestLeaderLease_* (internal/cli).
func TestHelmInstallLeader(t *testing.T) {
	helm := helmBin(t)
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := helmRelease{helm: helm, kubeconfig: c.Kubeconfig, name: "agora-helm-leader", agora: "helm-leader", agents: "helm-leader-agents"}
	for i := range 2 {
		claim := "home-agora-" + string(rune('0'+i))
		_, pv := homeVolume(t, r.agora, claim)
		pv["metadata"].(map[string]any)["name"] = "k8stest-helm-leader-" + claim
		if err := c.Apply(ctx, pv); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"install", r.name, chartDir, "--create-namespace", "--wait", "--timeout", "2m"}, r.values()...)
	r.run(ctx, t, append(args, leaderValues...)...)
	const image = "registry.example/agora/agora@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	for {
		pods := servePods(ctx, t, c, r.agora)
		if len(pods) == 2 && pods["agora-0"] == image && pods["agora-1"] == image {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("want pods agora-0 and agora-1 of the StatefulSet, have %v", pods)
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, a := range []struct {
		verb, group, resource, name string
		want                        bool
	}{
		{"create", "coordination.k8s.io", "leases", "", true},
		{"get", "coordination.k8s.io", "leases", "agora-leader", true},
		{"update", "coordination.k8s.io", "leases", "agora-leader", true},
		{"update", "coordination.k8s.io", "leases", "other", false},
		{"delete", "coordination.k8s.io", "leases", "agora-leader", false},
		{"list", "coordination.k8s.io", "leases", "", false},
		{"get", "", "secrets", "agora-keys", false},
		{"get", "", "secrets", "agora-s3", false},
		{"patch", "apps", "statefulsets", "agora", false},
		{"patch", "", "configmaps", "agora-config", false},
	} {
		if got := saAllowedNamed(ctx, t, c, r.agora, a.verb, a.group, a.resource, a.name, r.agora); got != a.want {
			t.Errorf("agora's service account may %s %s/%s %q in %s: %v, want %v", a.verb, a.group, a.resource, a.name, r.agora, got, a.want)
		}
	}
	r.run(ctx, t, "uninstall", r.name, "--wait", "--timeout", "2m")
	for _, claim := range []string{"home-agora-0", "home-agora-1"} {
		if objectUID(ctx, t, c, "/api/v1/namespaces/"+r.agora+"/persistentvolumeclaims/"+claim) == "" {
			t.Errorf("helm uninstall removed the replica's home %s", claim)
		}
	}
	if objectUID(ctx, t, c, "/apis/apps/v1/namespaces/"+r.agora+"/statefulsets/agora") != "" {
		t.Errorf("helm uninstall left the StatefulSet")
	}
}
