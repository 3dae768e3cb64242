package k8stest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// applyDeployFile applies each document of deploy/kubernetes/NAME as written.
func applyDeployFile(ctx context.Context, t *testing.T, c *k8stest.Cluster, name string) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/kubernetes/" + name)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Apply(ctx, obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// agoraSAAllowed asks the apiserver's own authorizer (a SubjectAccessReview, as the admin)
// whether the in-cluster agora's service account may do verb on resource[/sub] in ns.
func agoraSAAllowed(ctx context.Context, t *testing.T, c *k8stest.Cluster, verb, group, resource, sub, ns string) bool {
	t.Helper()
	review := map[string]any{
		"apiVersion": "authorization.k8s.io/v1",
		"kind":       "SubjectAccessReview",
		"spec": map[string]any{
			"user":   "system:serviceaccount:agora:agora",
			"groups": []string{"system:serviceaccounts", "system:serviceaccounts:agora", "system:authenticated"},
			"resourceAttributes": map[string]any{
				"namespace": ns, "verb": verb, "group": group, "resource": resource, "subresource": sub,
			},
		},
	}
	var out struct {
		Status struct{ Allowed bool } `json:"status"`
	}
	if err := c.Do(ctx, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review, &out); err != nil {
		t.Fatal(err)
	}
	return out.Status.Allowed
}

// TestRedTeam35_DeployRBAC: deploy/kubernetes's namespaces and RBAC, applied as written to the
// real apiserver, give agora's service account nothing beyond its Jobs, Pods (read), logs,
// Secrets (write only), NetworkPolicies and Sandboxes in namespace agents. The attacks: read a
// Secret anywhere (the pull secret in agents, agora's own), exec or attach into the agora pod
// or a dispatch's, create a bare pod, mint a service account token, widen its own Role or bind
// another, drop the namespaces' Pod Security labels, rewrite its own configuration or
// Deployment in namespace agora, or do anything cluster-wide.
func TestRedTeam35_DeployRBAC(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	applyDeployFile(ctx, t, c, "namespaces.yaml")
	applyDeployFile(ctx, t, c, "rbac.yaml")

	// The control: what the Role grants is granted, so a "denied" below is the Role's answer.
	// The apiserver's RBAC authorizer reads Roles and bindings through an informer, so a
	// just-applied Role reaches it a moment later: the control waits for that, and only then
	// do the denials mean anything.
	for _, a := range [][5]string{
		{"create", "batch", "jobs", "", "agents"},
		{"create", "", "secrets", "", "agents"},
		{"get", "", "pods", "log", "agents"},
	} {
		agoratest.WaitFor(t, 30*time.Second, fmt.Sprintf("the authorizer to grant %v (the Role)", a), func() bool {
			return agoraSAAllowed(ctx, t, c, a[0], a[1], a[2], a[3], a[4])
		})
	}
	denied := [][5]string{
		{"get", "", "secrets", "", "agents"},
		{"list", "", "secrets", "", "agents"},
		{"watch", "", "secrets", "", "agents"},
		{"get", "", "secrets", "", "agora"},
		{"list", "", "secrets", "", "agora"},
		{"list", "", "secrets", "", ""},
		{"list", "", "secrets", "", "kube-system"},
		{"create", "", "pods", "", "agents"},
		{"create", "", "pods", "exec", "agents"},
		{"create", "", "pods", "exec", "agora"},
		{"get", "", "pods", "exec", "agora"},
		{"create", "", "pods", "attach", "agora"},
		{"create", "", "pods", "portforward", "agora"},
		{"create", "", "pods", "ephemeralcontainers", "agents"},
		{"patch", "", "pods", "ephemeralcontainers", "agora"},
		{"get", "", "pods", "log", "agora"},
		{"create", "", "serviceaccounts", "token", "agents"},
		{"create", "", "serviceaccounts", "token", "agora"},
		{"patch", "rbac.authorization.k8s.io", "roles", "", "agents"},
		{"update", "rbac.authorization.k8s.io", "roles", "", "agents"},
		{"escalate", "rbac.authorization.k8s.io", "roles", "", "agents"},
		{"bind", "rbac.authorization.k8s.io", "roles", "", "agents"},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", "agents"},
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		{"patch", "", "namespaces", "", ""},
		{"update", "", "namespaces", "", ""},
		{"patch", "", "configmaps", "", "agora"},
		{"patch", "apps", "deployments", "", "agora"},
		{"create", "batch", "jobs", "", "agora"},
		{"create", "batch", "jobs", "", "default"},
		{"list", "batch", "jobs", "", ""},
		{"delete", "", "persistentvolumeclaims", "", "agora"},
		{"create", "", "persistentvolumes", "", ""},
		{"create", "", "persistentvolumeclaims", "", "agents"}, // a claim on agora's volume
		{"delete", "networking.k8s.io", "networkpolicies", "", "agora"},
		{"create", "", "nodes", "proxy", ""},
		{"get", "", "nodes", "proxy", ""},
		{"impersonate", "", "serviceaccounts", "", "agents"},
		{"impersonate", "", "users", "", ""},
		{"create", "certificates.k8s.io", "certificatesigningrequests", "", ""},
		{"create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", ""},
	}
	for _, a := range denied {
		if agoraSAAllowed(ctx, t, c, a[0], a[1], a[2], a[3], a[4]) {
			t.Errorf("agora's service account may %s %s/%s/%s in %q", a[0], a[1], a[2], a[3], a[4])
		}
	}
}

// TestRedTeam35_DeployPodSecurity: the Role lets agora's account create any Job in agents,
// and a Job's pod template is whatever the account writes; what stops a Job whose pod mounts
// the node's / (the agora pod's volume, the kubelet's credentials) or runs privileged is the
// namespaces' Pod Security "restricted", which namespaces.yaml must enforce on both
// namespaces. Attack: such a pod, created in each namespace once the file is applied, must be
// refused at admission.
func TestRedTeam35_DeployPodSecurity(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	applyDeployFile(ctx, t, c, "namespaces.yaml")
	for _, ns := range []string{"agents", "agora"} {
		for name, spec := range map[string]map[string]any{
			"hostpath": {
				"containers": []any{map[string]any{"name": "c", "image": "busybox",
					"volumeMounts": []any{map[string]any{"name": "root", "mountPath": "/host"}}}},
				"volumes": []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}},
			},
			"privileged": {
				"containers": []any{map[string]any{"name": "c", "image": "busybox",
					"securityContext": map[string]any{"privileged": true}}},
			},
			"hostnetwork": {
				"hostNetwork": true,
				"containers":  []any{map[string]any{"name": "c", "image": "busybox"}},
			},
		} {
			pod := map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "redteam35-" + name, "namespace": ns},
				"spec":     spec,
			}
			err := c.Do(ctx, "POST", "/api/v1/namespaces/"+ns+"/pods", pod, nil)
			if err == nil {
				_ = c.Do(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/pods/redteam35-"+name, nil, nil)
				t.Errorf("namespace %s admitted a %s pod: Pod Security restricted is not enforced", ns, name)
				continue
			}
			if !strings.Contains(err.Error(), "PodSecurity") && !strings.Contains(err.Error(), "restricted") {
				t.Errorf("namespace %s: %s pod refused, but not by Pod Security: %v", ns, name, err)
			}
		}
	}
}
