package k8stest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/k8stest"
)

// upgradeSubmit is the first driver (`kubectl exec` into serve): a shell capability, a quick
// and a slow exec subagent, a chain a -> c (slow) -> d on the manifests' kubernetes target,
// submitted to the running serve; then the run's status, every second, into out/status.json
// on the volume, which the test reads.
const upgradeSubmit = `set -eu
o=/var/lib/agora/out
mkdir -p /tmp/shell "$o"
printf 'commands: ["sh -c *"]\n' > /tmp/shell/capability.yaml
agora capability register shell --from /tmp/shell
agora subagent register quick --runtime exec --command "sh -c 'echo done'" --capability shell
agora subagent register slow --runtime exec --command "sh -c 'echo working; sleep 20'" --capability shell
cat > /tmp/plan.yaml <<'PLAN'
version: 1
name: upgrade
defaults: {target: k8s, timeout: 5m, retry: {max_attempts: 3, initial_backoff: 1s}}
tasks:
  - {id: a, subagent: quick}
  - {id: c, subagent: slow, depends_on: [a]}
  - {id: d, subagent: quick, depends_on: [c]}
PLAN
agora orch submit /tmp/plan.yaml > "$o/run.new"
mv "$o/run.new" "$o/run"
while :; do
  agora orch status "$(cat "$o/run")" -o json > "$o/status.submit.new" && mv "$o/status.submit.new" "$o/status.json"
  sleep 1
done
`

// upgradeFinish is the second driver, with the new image: it waits for run $RUN to end, exports
// its audit bundle and verifies it with the home's audit key. The first driver still loops
// beside it, so each writes its own temporary file before the rename (one shared name made
// the slower mv fail: "can't rename .../status.new").
const upgradeFinish = `set -eu
o=/var/lib/agora/out
while :; do
  agora orch status "$RUN" -o json > "$o/status.finish.new" && mv "$o/status.finish.new" "$o/status.json"
  grep -Eq '^  "state": "(succeeded|failed|cancelled)"' "$o/status.json" && break
  sleep 1
done
agora orch audit "$RUN" --out "$o/bundle.json"
agora verify "$o/bundle.json" --key "$AGORA_HOME/keys/audit.pub"
echo VERIFIED
`

// applyDeployPulled applies deploy/kubernetes's namespaces, rbac, config and deployment as
// written, with the images im from the registry, a docker-registry Secret regcred for it in
// both namespaces, and what the chart's values render for it: the serve pod's
// imagePullSecrets (imagePullSecrets), the target's image_pull_secrets and image_pull_policy
// Always (target.imagePullSecrets, target.imagePullPolicy). It returns the home volume's
// directory and the objects applied.
func applyDeployPulled(ctx context.Context, t *testing.T, c *k8stest.Cluster, reg *k8stest.Registry, im deployImages) (string, []map[string]any) {
	t.Helper()
	pvDir, pv := homeVolume(t, "agora", "agora-home")
	site := []string{"worker_image: " + placeholderWorker, "worker_image: " + im.worker +
		"\n        image_pull_secrets: [regcred]\n        image_pull_policy: Always"}
	objs := append([]map[string]any{pv}, manifestObjects(t, im, "namespaces.yaml")...)
	for _, ns := range []string{"agora", "agents"} {
		objs = append(objs, reg.PullSecret(ns, "regcred", reg.User, reg.Password))
	}
	// deployment.yaml's header: the web view's and MCP's token Secrets, made first.
	objs = append(objs, surfaceTokenSecrets(t)...)
	objs = append(objs, siteManifestObjects(t, im, site, "rbac.yaml", "config.yaml", "deployment.yaml")...)
	for _, obj := range objs {
		if err := c.Apply(ctx, withPullSecret(obj)); err != nil {
			t.Fatal(err)
		}
	}
	return pvDir, objs
}

// rollWithWorkInFlight is the upgrade: a plan a -> c -> d runs on serve; while c runs, the
// Deployment among objs is applied again with the image agora2, as `helm upgrade --set
// image.digest=` or an edited manifest does. The new serve takes the home over and the run
// finishes: a, c (in flight at the roll: its supervisor ended with the old pod, and the new
// serve adopted it) and d run once, each task succeeds once in the run's audit, and the
// exported bundle verifies.
func rollWithWorkInFlight(ctx context.Context, t *testing.T, c *k8stest.Cluster, objs []map[string]any, pvDir string, serve podInfo, agora1, agora2 string) {
	t.Helper()
	if err := c.Apply(ctx, withPullSecret(shellJob("agora-submit", agora1, "agora-home", upgradeSubmit, nil, nil))); err != nil {
		t.Fatal(err)
	}
	run := waitTaskRunning(ctx, t, c, filepath.Join(pvDir, "out"), "c", serve)
	t.Logf("run %s: task c runs; rolling the Deployment to %s", run, agora2)
	for _, obj := range objs {
		if obj["kind"] == "Deployment" {
			setServeImage(t, obj, agora2)
			if err := c.Apply(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	next := waitServingBut(ctx, t, c, serve.name)
	t.Logf("%s serves the home after %s", next.name, serve.name)

	env := []any{map[string]string{"name": "RUN", "value": run}}
	if err := c.Apply(ctx, withPullSecret(shellJob("agora-finish", agora2, "agora-home", upgradeFinish, env, nil))); err != nil {
		t.Fatal(err)
	}
	out := waitDriver(ctx, t, c, "agora-finish", next)
	if !strings.Contains(out, "VERIFIED") {
		t.Errorf("the run's bundle did not verify:\n%s", out)
	}
	checkUpgradedRun(t, filepath.Join(pvDir, "out"))
}

// pushDeployImages pushes podman's three images to the registry, and a second agora image
// (the first under another label, so another digest) as tag rollout; it returns the pinned
// references the registry holds.
func pushDeployImages(ctx context.Context, t *testing.T, reg *k8stest.Registry, src deployImages) (deployImages, string) {
	t.Helper()
	var im deployImages
	var err error
	for _, x := range []struct {
		src, repo string
		dst       *string
	}{{src.agora, "agora/agora", &im.agora}, {src.worker, "agora/worker", &im.worker}, {src.toolchain, "agents/toolchain", &im.toolchain}} {
		if *x.dst, err = reg.PushPodman(ctx, x.src, x.repo, "e2e"); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	base, _, _ := strings.Cut(src.agora, "@")
	containerfile := fmt.Sprintf("FROM %s\nLABEL agora.rollout=%d\n", base, time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(containerfile), 0o600); err != nil {
		t.Fatal(err)
	}
	tag := "localhost/agora:rollout-test"
	if out, err := exec.CommandContext(ctx, "podman", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build the second agora image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", tag).Run() })
	agora2, err := reg.PushPodman(ctx, tag, "agora/agora", "rollout")
	if err != nil {
		t.Fatal(err)
	}
	if agora2 == im.agora {
		t.Fatalf("the second agora image has the first one's digest: %s", agora2)
	}
	return im, agora2
}

// withPullSecret gives a Deployment's or Job's pod imagePullSecrets [regcred], as the chart's
// imagePullSecrets value renders it; other objects are returned as they are.
func withPullSecret(obj map[string]any) map[string]any {
	if obj["kind"] != "Deployment" && obj["kind"] != "Job" {
		return obj
	}
	tmpl := obj["spec"].(map[string]any)["template"].(map[string]any)
	tmpl["spec"].(map[string]any)["imagePullSecrets"] = []any{map[string]any{"name": "regcred"}}
	return obj
}

// setServeImage sets the image of the Deployment's containers, serve's (agora) and agora
// mcp's beside it, as `helm upgrade --set image.digest=` does.
func setServeImage(t *testing.T, obj map[string]any, image string) {
	t.Helper()
	spec := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	found := false
	for _, c := range spec["containers"].([]any) {
		m := c.(map[string]any)
		found = found || m["name"] == "agora"
		m["image"] = image
	}
	if !found {
		t.Fatal("the Deployment has no container agora")
	}
}

// waitTaskRunning waits until out/status.json says task id runs and returns the run's id.
func waitTaskRunning(ctx context.Context, t *testing.T, c *k8stest.Cluster, out, id string, serve podInfo) string {
	t.Helper()
	for {
		if b, err := os.ReadFile(filepath.Join(out, "status.json")); err == nil && len(b) > 0 {
			r := readStatus(t, filepath.Join(out, "status.json"))
			if st, _ := r.task(id); st == "running" {
				return r.ID
			}
			if r.State == "failed" {
				t.Fatalf("the run failed before the roll: %+v\nserve:\n%s", r, podLog(ctx, c, "agora", serve.name, "agora"))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s never ran: %v\nserve:\n%s\ndriver:\n%s", id, ctx.Err(),
				podLog(context.Background(), c, "agora", serve.name, "agora"), jobLog(c, "agora-submit"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkUpgradedRun: the run succeeded; a, c (adopted) and d ran once; each task succeeded once
// in the run's audit bundle.
func checkUpgradedRun(t *testing.T, out string) {
	t.Helper()
	r := readStatus(t, filepath.Join(out, "status.json"))
	t.Logf("the run after the roll: %+v", r)
	if r.State != "succeeded" {
		t.Fatalf("the run did not succeed after the roll: %+v", r)
	}
	for x, want := range map[string]int{"a": 1, "d": 1} {
		if _, n := r.task(x); n != want {
			t.Errorf("task %s ran %d times, want %d", x, n, want)
		}
	}
	// c's Job outlived the old pod and reached the new one at the gateway's ClusterIP: the
	// new serve adopted its dispatch and c ran once.
	if _, n := r.task("c"); n != 1 {
		t.Errorf("task c (in flight at the roll) ran %d times, want once (adopted by the new serve)", n)
	}
	if n := dispatchEntries(t, filepath.Join(out, "bundle.json"), "dispatch.adopted"); n != 1 {
		t.Errorf("%d dispatch.adopted entries in the run's audit, want 1 (c's, by the new serve)", n)
	}
	succeeded := map[string]int{}
	for _, e := range bundleEntries(t, filepath.Join(out, "bundle.json")) {
		if e.Kind == "orch.task.succeeded" {
			succeeded[e.task()]++
		}
	}
	for _, x := range []string{"a", "c", "d"} {
		if succeeded[x] != 1 {
			t.Errorf("task %s succeeded %d times in the run's audit, want once: %v", x, succeeded[x], succeeded)
		}
	}
}

// dispatchEntries counts the entries of kind in the dispatches part of the run bundle at path.
func dispatchEntries(t *testing.T, path, kind string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := verify.ParseRunBundle(f)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range b.Dispatches.Entries {
		fields, err := verify.DecodeEntry(e.Entry)
		if err != nil {
			t.Fatal(err)
		}
		if fields.Kind == kind {
			n++
		}
	}
	return n
}
