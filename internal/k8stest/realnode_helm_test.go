package k8stest_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestRealNodeHelmInstallFromRegistry: the chart installed by `helm install` on the real
// control plane and kubelet, its three images published to a real registry (TLS, htpasswd)
// and pulled from it with the pull secrets the chart's values name: the serve pod's
// (imagePullSecrets, in agora) and the dispatches' (target.imagePullSecrets with
// imagePullPolicy Always, in agents: each Job's pod pulls the worker and toolchain images
// again). The namespaces exist first with their Secrets (namespaces.create=false, the path for
// a site that makes them itself). A plan submitted to the running serve runs as a Job whose
// patch is read back; then `helm upgrade` changing agora.yaml rolls serve to a new pod on the
// same home, which serves again. About 40 s once the images are built (load ~11): worth it as
// the one test of the user's own path, `helm install` and `helm upgrade` by helm's code on a
// real kubelet pulling through the chart's pull-secret values; the manifests' tests apply
// the rendering with kubectl's semantics instead.
func TestRealNodeHelmInstallFromRegistry(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	im := deployImageRefs(ctx, t)
	podman := map[string]string{"AGORA_IMAGE": im.agora, "AGORA_WORKER_IMAGE": im.worker, "AGORA_TOOLCHAIN_IMAGE": im.toolchain}
	c := k8stest.Start(t, k8stest.Options{RealNode: true, InClusterAPI: true})
	reg := c.StartRegistry(t)
	pushed := map[string]string{}
	for key, repo := range map[string]string{"AGORA_IMAGE": "agora/agora", "AGORA_WORKER_IMAGE": "agora/worker", "AGORA_TOOLCHAIN_IMAGE": "agents/toolchain"} {
		ref, err := reg.PushPodman(ctx, podman[key], repo, "ci")
		if err != nil {
			t.Fatal(err)
		}
		pushed[key] = ref
	}
	_, pv := homeVolume(t, "agora", "agora-home")
	objs := []map[string]any{pv}
	for _, ns := range []string{"agora", "agents"} {
		objs = append(objs, map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": ns, "labels": map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}},
		}, reg.PullSecret(ns, "regcred", reg.User, reg.Password))
	}
	// The chart's header: the web view's and MCP's token Secrets, made first.
	objs = append(objs, surfaceTokenSecrets(t)...)
	for _, obj := range objs {
		if err := c.Apply(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	image := func(prefix, key string) []string {
		repo, digest, _ := strings.Cut(pushed[key], "@")
		return []string{"--set", prefix + ".repository=" + repo, "--set", prefix + ".digest=" + digest}
	}
	args := []string{"install", "agora", chartDir, "--namespace", "agora", "--kubeconfig", c.Kubeconfig,
		"--set", "namespaces.create=false", "--set", "imagePullSecrets={regcred}",
		"--set", "target.imagePullSecrets={regcred}", "--set", "target.imagePullPolicy=Always"}
	args = append(args, image("image", "AGORA_IMAGE")...)
	args = append(args, image("target.image", "AGORA_TOOLCHAIN_IMAGE")...)
	args = append(args, image("target.workerImage", "AGORA_WORKER_IMAGE")...)
	if out, err := runHelm(ctx, helm, args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	serve := waitServing(ctx, t, c)

	if err := c.Apply(ctx, catalogConfigMap(t)); err != nil {
		t.Fatal(err)
	}
	// The driver runs the agora image with the pull secret too: a kubelet that checks an image
	// pulled with credentials again for each pod (KubeletEnsureSecretPulledImages) would not
	// start a pod without it, though the node holds the image.
	driver := driverJob(pushed["AGORA_IMAGE"])
	dig(driver, "spec", "template", "spec").(map[string]any)["imagePullSecrets"] = []any{map[string]string{"name": "regcred"}}
	if err := c.Apply(ctx, driver); err != nil {
		t.Fatal(err)
	}
	out := waitDriver(ctx, t, c, "agora-driver", serve)
	if !strings.Contains(out, "+hello from the cluster") || !strings.Contains(out, "GREETING.txt") {
		t.Errorf("the run's patch does not write GREETING.txt with the env's greeting:\n%s", out)
	}
	// The dispatch's pod ran the images from the registry, pulled with the secret.
	var pods struct {
		Items []struct {
			Spec struct {
				ImagePullSecrets []struct{ Name string }
				InitContainers   []struct{ Image, ImagePullPolicy string }
				Containers       []struct{ Image, ImagePullPolicy string }
			}
		}
	}
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/agents/pods", nil, &pods); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no dispatch pod in agents")
	}
	for _, p := range pods.Items {
		ctrs := append(p.Spec.InitContainers, p.Spec.Containers...)
		if len(p.Spec.ImagePullSecrets) != 1 || p.Spec.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("a dispatch pod's pull secrets: %+v", p.Spec.ImagePullSecrets)
		}
		for _, ctr := range ctrs {
			if !strings.HasPrefix(ctr.Image, reg.Host+"/") || ctr.ImagePullPolicy != "Always" {
				t.Errorf("a dispatch container runs %s (%s), want the registry's, pulled Always", ctr.Image, ctr.ImagePullPolicy)
			}
		}
	}

	// An upgrade that changes agora.yaml rolls serve; the new pod serves on the same home.
	up := []string{"upgrade", "agora", chartDir, "--namespace", "agora", "--kubeconfig", c.Kubeconfig, "--reuse-values",
		"--set", "target.imagePullPolicy=IfNotPresent"}
	if out, err := runHelm(ctx, helm, up...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	agoratest.Eventually(t, 5*time.Minute, "helm upgrade to roll serve", func() error {
		p := waitServing(ctx, t, c)
		if p.name == serve.name {
			return fmt.Errorf("%s still serves", p.name)
		}
		t.Logf("helm upgrade rolled serve from %s to %s", serve.name, p.name)
		return nil
	})
}
