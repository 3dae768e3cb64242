package k8stest_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// haConfig is deploy/kubernetes/ha's agora.yaml as the init container writes it for pod: the
// ConfigMap's, with the pod's name for @POD_NAME@ (wherever a site's extraConfig uses it),
// parsed and validated as serve does.
func haConfig(t *testing.T, pod string) *config.Config {
	t.Helper()
	src, _ := dig(deployDocs(t, "ha/config.yaml")["ConfigMap/agora-config"], "data", "agora.yaml").(string)
	c := config.Default("/var/lib/agora/home")
	if err := config.Parse("ha/config.yaml", []byte(strings.ReplaceAll(src, "@POD_NAME@", pod)), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDeployHA_LeaseRoleIsTheLeaseAlone: deploy/kubernetes/ha grants the replicas' account
// create on Leases (a name cannot limit create) and get and update on the one Lease that
// agora.yaml names, in its namespace: nothing else, no other Role, nothing cluster-wide. An
// account that could update another Lease, or list Secrets, would be a wider edit.
func TestDeployHA_LeaseRoleIsTheLeaseAlone(t *testing.T) {
	c := haConfig(t, "agora-0")
	if !c.Leader.Set() || c.Leader.Identity != "" || c.Leader.Kubeconfig != "" {
		t.Fatalf("leader: %+v, want a lease, in-cluster, each pod's own name as identity", c.Leader)
	}
	if c.Replicate.S3 == nil || c.Blobs.S3 == nil {
		t.Fatal("ha/config.yaml replicates to no bucket or keeps blobs on the pod's volume: a takeover would lose them")
	}
	for _, f := range []string{"ha/config.yaml", "ha/statefulset.yaml", "ha/rbac.yaml"} {
		for k, obj := range deployDocs(t, f) {
			if strings.HasPrefix(k, "ClusterRole") || (strings.HasPrefix(k, "Role") && k != "Role/agora-leader" && k != "RoleBinding/agora-leader") {
				t.Errorf("%s holds %s", f, k)
			}
			if ns := dig(obj, "metadata", "namespace"); ns != c.Leader.Namespace {
				t.Errorf("%s: %s in namespace %v, want the Lease's %s", f, k, ns, c.Leader.Namespace)
			}
		}
	}
	docs := deployDocs(t, "ha/rbac.yaml")
	want := []any{
		map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "verbs": []any{"create"}},
		map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"}, "resourceNames": []any{c.Leader.Lease}, "verbs": []any{"get", "update"}},
	}
	if got := dig(docs["Role/agora-leader"], "rules"); !reflect.DeepEqual(got, want) {
		t.Errorf("the Lease Role grants %v, want %v", got, want)
	}
	rb := docs["RoleBinding/agora-leader"]
	if subj := dig(rb, "subjects"); !reflect.DeepEqual(subj, []any{map[string]any{"kind": "ServiceAccount", "name": "agora", "namespace": "agora"}}) ||
		dig(rb, "roleRef", "kind") != "Role" || dig(rb, "roleRef", "name") != "agora-leader" {
		t.Errorf("the Lease RoleBinding binds %v to %v", subj, dig(rb, "roleRef"))
	}
}

// TestDeployHA_ServePodSurface: the StatefulSet's pod as ha/statefulset.yaml writes it, held to
// what deployment.yaml's is (TestRedTeam35_DeployServePodSurface), plus the keys: the shared
// keys Secret is mounted in the init container alone, read-only, readable by no one but the
// pod's group; serve sees only the private 0600 copies in its home, the gateway's CA among them.
// Every pod advertises the one Service agora-gateway-vip, whose endpoint is the replica
// that is Ready: the readiness probe asks the gateway's /readyz, which only the leader passes;
// the Jobs' policies admit serve's pods as the gateway's peer.
func TestDeployHA_ServePodSurface(t *testing.T) {
	docs := deployDocs(t, "ha/statefulset.yaml")
	sts := docs["StatefulSet/agora"]
	pod := dig(sts, "spec", "template", "spec")
	if pod == nil {
		t.Fatal("ha/statefulset.yaml: no StatefulSet agora with a pod template")
	}
	if dig(pod, "securityContext", "fsGroupChangePolicy") != "OnRootMismatch" || dig(pod, "securityContext", "runAsNonRoot") != true {
		t.Errorf("pod securityContext %v", dig(pod, "securityContext"))
	}
	for _, k := range []string{"hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "ephemeralContainers"} {
		if dig(pod, k) != nil {
			t.Errorf("the serve pod sets %s", k)
		}
	}
	for i, v := range dig(pod, "volumes").([]any) {
		switch {
		case dig(v, "configMap") != nil, dig(v, "emptyDir") != nil:
		case dig(v, "secret", "secretName") == "agora-keys":
			if mode, _ := dig(v, "secret", "defaultMode").(int); mode&0o007 != 0 || mode&0o200 != 0 {
				t.Errorf("the keys are mounted with mode %04o", mode)
			}
		default:
			t.Errorf("volume %d is not the ConfigMap, an emptyDir or the keys: %v", i, v)
		}
	}
	inits, ctrs := dig(pod, "initContainers").([]any), dig(pod, "containers").([]any)
	if len(inits) != 1 || len(ctrs) != 2 || dig(ctrs[0], "name") != "agora" || dig(ctrs[1], "name") != "mcp" {
		t.Fatalf("%d init containers and %d containers, want the home's, agora and mcp (#31)", len(inits), len(ctrs))
	}
	for _, c := range append(slices.Clone(inits), ctrs...) {
		sc := dig(c, "securityContext")
		if dig(sc, "readOnlyRootFilesystem") != true || dig(sc, "allowPrivilegeEscalation") != false ||
			!slices.Equal(dig(sc, "capabilities", "drop").([]any), []any{"ALL"}) || dig(sc, "capabilities", "add") != nil {
			t.Errorf("container %v's securityContext is wider: %v", dig(c, "name"), sc)
		}
		for _, m := range dig(c, "volumeMounts").([]any) {
			if n := dig(m, "name"); n != "home" && n != "tmp" && dig(m, "readOnly") != true {
				t.Errorf("container %v mounts %v writable", dig(c, "name"), n)
			}
			if dig(m, "name") == "keys" && dig(c, "name") != "home" {
				t.Errorf("container %v mounts the shared keys", dig(c, "name"))
			}
		}
	}
	checkOnlyListeners(t, "ha/statefulset.yaml", ctrs)
	svc := dig(sts, "spec", "serviceName")
	if dig(docs["Service/agora-gateway"], "spec", "clusterIP") != "None" || svc != "agora-gateway" {
		t.Errorf("serviceName %v: want the headless Service agora-gateway", svc)
	}
	for _, p := range []string{"agora-0", "agora-1"} {
		c := haConfig(t, p)
		if got, want := c.Gateway.Advertise, "https://agora-gateway-vip.agora.svc.cluster.local:8443"; got != want {
			t.Errorf("%s advertises %q, want the Service %q", p, got, want)
		}
		if gp := c.Targets["k8s"].GatewayPeer; gp == nil || gp.Namespace != "agora" || !reflect.DeepEqual(gp.Pods, map[string]string{"app": "agora"}) {
			t.Errorf("%s's target admits %+v as the gateway's peer, want serve's pods (agora, app=agora)", p, gp)
		}
	}
	vip := docs["Service/agora-gateway-vip"]
	if dig(vip, "spec", "type") != "ClusterIP" || !reflect.DeepEqual(dig(vip, "spec", "selector"), map[string]any{"app": "agora"}) ||
		!reflect.DeepEqual(dig(vip, "spec", "ports"), []any{map[string]any{"name": "gateway", "port": 8443, "targetPort": "gateway"}}) {
		t.Errorf("Service agora-gateway-vip: %v", dig(vip, "spec"))
	}
	// The Service's endpoint is the leader alone: the pod is Ready only while the gateway's
	// /readyz answers 200 (a fence that passes), probed over HTTPS on the gateway's port.
	probe := dig(ctrs[0], "readinessProbe")
	if dig(probe, "httpGet", "path") != "/readyz" || dig(probe, "httpGet", "port") != "gateway" || dig(probe, "httpGet", "scheme") != "HTTPS" ||
		dig(probe, "failureThreshold") != 1 {
		t.Errorf("the agora container's readiness probe %v, want the gateway's /readyz over HTTPS, not Ready at the first failure", probe)
	}
	// A standby is never Ready: a rollout that waited for one would never end.
	if got := dig(sts, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable"); got != dig(sts, "spec", "replicas") {
		t.Errorf("updateStrategy maxUnavailable %v, want every replica (%v)", got, dig(sts, "spec", "replicas"))
	}
	script := strings.Join(func() []string {
		var out []string
		for _, a := range dig(inits[0], "command").([]any) {
			out = append(out, a.(string))
		}
		return out
	}(), " ")
	if !strings.Contains(script, "gateway-ca.pem gateway-ca.key") {
		t.Errorf("the init container does not copy the shared gateway CA into the home:\n%s", script)
	}
}
