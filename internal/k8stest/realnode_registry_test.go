package k8stest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// TestRealNodeRegistryPull (#31): the real kubelet pulls an image pinned by digest from a real
// registry (TLS from the test's CA, htpasswd auth) with a kubernetes.io/dockerconfigjson pull
// secret and imagePullPolicy Always; without the secret, and with a secret of the wrong
// password, the pull is refused by the registry (401) and the kubelet says so in the
// container's waiting state. The image is podman's toolchain image, pushed by podman.
func TestRealNodeRegistryPull(t *testing.T) {
	toolchain := k8stest.ToolchainImage(t)
	c := k8stest.Start(t, k8stest.Options{RealNode: true})
	reg := c.StartRegistry(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ref, err := reg.PushPodman(ctx, toolchain, "agents/toolchain", "ci")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed %s", ref)
	for _, s := range []map[string]any{
		reg.PullSecret(c.Namespace, "regcred", reg.User, reg.Password),
		reg.PullSecret(c.Namespace, "regcred-wrong", reg.User, reg.Password+"x"),
	} {
		if err := c.Apply(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	spec := func(secret string) map[string]any {
		s := hardenedPodSpec()
		ctr := s["containers"].([]any)[0].(map[string]any)
		ctr["image"], ctr["imagePullPolicy"], ctr["command"] = ref, "Always", []string{"sh", "-c", "echo pulled"}
		if secret != "" {
			s["imagePullSecrets"] = []any{map[string]string{"name": secret}}
		}
		return s
	}
	if err := c.Do(ctx, http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs", job("pull-ok", nil, nil, spec("regcred")), nil); err != nil {
		t.Fatal(err)
	}
	if end := waitJobOn(t, c, "pull-ok"); end != "Complete" {
		t.Fatalf("the pull with the secret ended %s, want Complete\nkubelet:\n%s", end, c.Log("kubelet"))
	}
	for name, secret := range map[string]string{"pull-nosecret": "", "pull-wrong": "regcred-wrong"} {
		if err := c.Do(ctx, http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs", job(name, nil, nil, spec(secret)), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"pull-nosecret", "pull-wrong"} {
		reason, msg := waitPullRefused(ctx, t, c, name)
		t.Logf("%s: %s: %s", name, reason, msg)
		if !strings.Contains(msg, "401") && !strings.Contains(strings.ToLower(msg), "unauthorized") {
			t.Errorf("%s: the pull failed with %q, not the registry's refusal (401)", name, msg)
		}
	}
}

// waitPullRefused waits for the Job's pod's container to wait on ErrImagePull or
// ImagePullBackOff, and returns the reason and the kubelet's message.
func waitPullRefused(ctx context.Context, t *testing.T, c *k8stest.Cluster, name string) (string, string) {
	t.Helper()
	for {
		for _, p := range jobPods(t, c, name).Items {
			for _, st := range p.Status.ContainerStatuses {
				if w := st.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
					return w.Reason, w.Message
				}
				if st.State.Terminated != nil {
					t.Fatalf("%s: the container ran: the pull was not refused", name)
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no pull refusal: %v\nkubelet:\n%s", name, ctx.Err(), tail(c.Log("kubelet"), 3000))
		case <-time.After(500 * time.Millisecond):
		}
	}
}
