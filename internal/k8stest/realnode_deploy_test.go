package k8stest_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// deployCatalog is the catalog the driver applies in the cluster: examples/catalog's hello
// (an exec subagent: no model) with its capability, and an env of plain values.
const deployCatalog = `version: 1
capabilities: [{name: repo-tools, from: capabilities/repo-tools}]
subagents: [{name: hello, from: subagents/hello.yaml}]
envs: [{name: demo, values: {GREETING: hello from the cluster}}]
`

// deployPlan is one task on the manifests' kubernetes target.
const deployPlan = `version: 1
name: in-cluster
defaults: {target: k8s, env: [demo], timeout: 5m}
tasks:
  - {id: greet, subagent: hello, input: {task: greet}}
`

// deployDriver is what a person does with `kubectl exec deploy/agora -- ...` (this harness has
// no exec client, so a Job of the same image on the same volume does it): a repository on the
// volume, the catalog applied, a plan submitted to the running serve and waited on, and its
// patch printed.
const deployDriver = `set -eu
r=/var/lib/agora/repos/demo
git init -q -b main "$r"
printf '# demo\n' > "$r/README.md"
git -C "$r" add README.md
git -C "$r" -c user.name=t -c user.email=t@example.invalid commit -q -m init
cp -rL /catalog /tmp/catalog   # the ConfigMap's files, not its links
agora apply -f /tmp/catalog/agora-manifest.yaml
run=$(agora orch submit /catalog/plan.yaml --repo "$r" --wait)
echo "RUN=$run"
agora orch status "$run"
echo PATCH-BEGIN
agora orch patches "$run" --combined
echo PATCH-END
`

// TestRealNodeDeployManifests: deploy/kubernetes's files, applied as written to the real
// control plane and kubelet, run `agora orch serve` in the cluster under the manifests'
// service account and Role, its images pulled from a real registry with a pull secret; then
// the Deployment is rolled to a new agora image while a plan's task runs.
//
// The three images (agora's, the worker's and the toolchain's, built from this tree by
// scripts/images.sh) and a second agora image (the same bytes under another label: another
// digest) are pushed to a registry with TLS and htpasswd auth; what is substituted is those
// images, a docker-registry Secret regcred in both namespaces, and what the chart's values
// render for it (the serve pod's imagePullSecrets, the target's image_pull_secrets and
// image_pull_policy Always). serve's home on the claim's volume is made 0700 below the
// volume's group-writable root, its gateway is reached by the pod name the headless Service
// gives it, and a plan submitted to it runs its task as a Job in namespace agents on the same
// node, whose patch is read back. Then the rollout with work in flight (rollWithWorkInFlight).
// 88 s at load 2-8 once the images were built (the first part alone took 40 s; a separate
// cluster for the rollout took 90 more): the one test of the manifests as written, of a pull
// with a secret by serve's own pod, and of a rollout with work in flight, on one cluster.
func TestRealNodeDeployManifests(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{RealNode: true, InClusterAPI: true})
	reg := c.StartRegistry(t)
	ctx, cancel := context.WithTimeout(t.Context(), 14*time.Minute)
	defer cancel()
	im, agora2 := pushDeployImages(ctx, t, reg, deployImageRefs(ctx, t))
	t.Logf("in the registry: agora %s (then %s), worker %s, toolchain %s", im.agora, agora2, im.worker, im.toolchain)
	pvDir, objs := applyDeployPulled(ctx, t, c, reg, im)
	serve := waitServing(ctx, t, c)
	checkServeSurfaces(ctx, t, c, serve, objs)

	if err := c.Apply(ctx, catalogConfigMap(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, withPullSecret(driverJob(im.agora))); err != nil {
		t.Fatal(err)
	}
	out := waitDriver(ctx, t, c, "agora-driver", serve)
	t.Logf("the driver (a plan submitted to serve in the cluster):\n%s", out)
	if !strings.Contains(out, "+hello from the cluster") || !strings.Contains(out, "GREETING.txt") {
		t.Errorf("the run's patch does not write GREETING.txt with the env's greeting:\n%s", out)
	}
	checkDeployedRun(ctx, t, c, serve, pvDir)
	rollWithWorkInFlight(ctx, t, c, objs, pvDir, serve, im.agora, agora2)
}

// checkDeployedRun: the task ran as a Job agora made in agents, on the real node, and the
// home agora made on the volume is private.
func checkDeployedRun(ctx context.Context, t *testing.T, c *k8stest.Cluster, serve podInfo, pvDir string) {
	t.Helper()
	var jobs struct {
		Items []struct {
			Metadata struct {
				Name   string
				Labels map[string]string
			}
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/apis/batch/v1/namespaces/agents/jobs", nil, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) == 0 || !strings.HasPrefix(jobs.Items[0].Metadata.Name, "agora-") {
		t.Errorf("no agora Job in namespace agents: %+v\nserve log:\n%s", jobs.Items, podLog(ctx, c, "agora", serve.name, "agora"))
	}
	for _, p := range podsOf(ctx, t, c, "agents", "") {
		if p.node != k8stest.RealNodeName {
			t.Errorf("dispatch pod %s ran on %q, want the real node", p.name, p.node)
		}
	}
	// The volume's root stays what the kubelet made it.
	fi, err := os.Stat(filepath.Join(pvDir, "home"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("AGORA_HOME on the volume has mode %04o, want 0700", fi.Mode().Perm())
	}
}

// waitServing waits for the Deployment's pod to run serve with its gateway, on the real node.
func waitServing(ctx context.Context, t *testing.T, c *k8stest.Cluster) podInfo {
	t.Helper()
	return waitServingBut(ctx, t, c, "")
}

// waitServingBut is waitServing for a pod other than the one named old (a rollout's new pod).
func waitServingBut(ctx context.Context, t *testing.T, c *k8stest.Cluster, old string) podInfo {
	t.Helper()
	for {
		for _, p := range podsOf(ctx, t, c, "agora", "app%3Dagora") {
			if p.name == old {
				continue
			}
			if p.phase == "Running" && strings.Contains(podLog(ctx, c, "agora", p.name, "agora"), "gateway serving") {
				if p.node != k8stest.RealNodeName {
					t.Fatalf("serve's pod runs on %q", p.node)
				}
				return p
			}
			if p.phase == "Failed" {
				t.Fatalf("serve's pod %s failed:\n%s", p.name, podLog(ctx, c, "agora", p.name, "agora"))
			}
		}
		select {
		case <-ctx.Done():
			var logs strings.Builder
			for _, p := range podsOf(context.Background(), t, c, "agora", "app%3Dagora") {
				logs.WriteString(p.name + " " + p.phase + ":\n" + podLog(context.Background(), c, "agora", p.name, "agora") + "\n")
			}
			var ev []byte
			_ = c.Do(context.Background(), http.MethodGet, "/api/v1/namespaces/agora/events", nil, &ev)
			t.Fatalf("serve never came up: %v\n%s\nevents:\n%s\nkubelet:\n%s", ctx.Err(), logs.String(), ev, tail(c.Log("kubelet"), 3000))
		case <-time.After(time.Second):
		}
	}
}

// waitDriver waits for the pod of driver Job job to end and returns its log; it fails t when
// the pod failed.
func waitDriver(ctx context.Context, t *testing.T, c *k8stest.Cluster, job string, serve podInfo) string {
	t.Helper()
	for {
		for _, p := range podsOf(ctx, t, c, "agora", "job-name%3D"+job) {
			switch p.phase {
			case "Succeeded":
				return podLog(ctx, c, "agora", p.name, "driver")
			case "Failed":
				t.Fatalf("the driver failed:\n%s\nserve log:\n%s", podLog(ctx, c, "agora", p.name, "driver"), podLog(ctx, c, "agora", serve.name, "agora"))
			}
		}
		select {
		case <-ctx.Done():
			var ev []byte
			_ = c.Do(context.Background(), http.MethodGet, "/api/v1/namespaces/agents/events", nil, &ev)
			t.Fatalf("the driver never ended: %v\nserve log:\n%s\nagents events:\n%s", ctx.Err(), podLog(context.Background(), c, "agora", serve.name, "agora"), ev)
		case <-time.After(time.Second):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// catalogConfigMap holds the driver's catalog manifest, the example catalog's files it names,
// and the plan.
func catalogConfigMap(t *testing.T) map[string]any {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join("../../examples/catalog", p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "agora-driver", "namespace": "agora"},
		"data": map[string]string{
			"manifest": deployCatalog, "plan": deployPlan,
			"capability": read("capabilities/repo-tools/capability.yaml"),
			"readme":     read("capabilities/repo-tools/README.md"),
			"hello":      read("subagents/hello.yaml"),
		},
	}
}

// driverJob runs deployDriver with the serve pod's image, user and volume, with the catalog.
func driverJob(image string) map[string]any {
	item := func(k, p string) map[string]string { return map[string]string{"key": k, "path": p} }
	return shellJob("agora-driver", image, "agora-home", deployDriver, nil,
		map[string]any{"name": "catalog", "configMap": map[string]any{"name": "agora-driver", "items": []any{
			item("manifest", "agora-manifest.yaml"), item("plan", "plan.yaml"),
			item("capability", "capabilities/repo-tools/capability.yaml"),
			item("readme", "capabilities/repo-tools/README.md"),
			item("hello", "subagents/hello.yaml"),
		}}})
}

// shellJob runs script with serve's image and user on the volume of claim (as AGORA_HOME
// /var/lib/agora/home, agora.yaml at /etc/agora), under Pod Security "restricted" as namespace
// agora enforces: what a person does with `kubectl exec` into serve's pod. env adds the
// container's variables (as a pod spec writes them); a catalog volume, when given, is mounted
// at /catalog.
func shellJob(name, image, claim, script string, env []any, catalog map[string]any) map[string]any {
	vars := append([]any{
		map[string]string{"name": "AGORA_HOME", "value": "/var/lib/agora/home"},
		map[string]string{"name": "HOME", "value": "/var/lib/agora"},
	}, env...)
	mounts := []any{
		map[string]any{"name": "home", "mountPath": "/var/lib/agora"},
		map[string]any{"name": "config", "mountPath": "/etc/agora", "readOnly": true},
		map[string]any{"name": "tmp", "mountPath": "/tmp"},
	}
	volumes := []any{
		map[string]any{"name": "home", "persistentVolumeClaim": map[string]string{"claimName": claim}},
		map[string]any{"name": "config", "configMap": map[string]string{"name": "agora-config"}},
		map[string]any{"name": "tmp", "emptyDir": map[string]any{}},
	}
	if catalog != nil {
		mounts = append(mounts, map[string]any{"name": "catalog", "mountPath": "/catalog", "readOnly": true})
		volumes = append(volumes, catalog)
	}
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": name, "namespace": "agora"},
		"spec": map[string]any{
			"backoffLimit": 0,
			"template": map[string]any{"spec": map[string]any{
				"restartPolicy":                "Never",
				"automountServiceAccountToken": false,
				"securityContext": map[string]any{
					"runAsNonRoot": true, "runAsUser": 10001, "runAsGroup": 10001,
					"seccompProfile": map[string]any{"type": "RuntimeDefault"},
				},
				"containers": []any{map[string]any{
					"name": "driver", "image": image, "command": []string{"sh", "-c", script},
					"env": vars, "volumeMounts": mounts,
					"securityContext": map[string]any{
						"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
						"capabilities": map[string]any{"drop": []string{"ALL"}},
					},
				}},
				"volumes": volumes,
			}},
		},
	}
}
