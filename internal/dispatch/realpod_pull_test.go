package dispatch_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestDispatch_RealPodPullSecret: agora's worker image, made from the worker under test,
// and the toolchain image are pushed to a real registry (TLS from the test's CA, htpasswd
// auth) and a kubernetes target
// with image_pull_secrets: [regcred] and image_pull_policy: Always names it by digest: the
// real kubelet pulls it with the secret and the dispatch runs to its patch. The same target
// without the secret, and with a secret holding a wrong password, is refused by the registry:
// each dispatch fails provider-failed with the kubelet's words (ErrImagePull, 401) and the
// secrets it should check, at the first refusal rather than at its timeout, its Job is gone,
// and neither the record nor its logs hold the registry's password. A node that does not trust
// the registry's CA refuses the pull for the certificate (x509).
func TestDispatch_RealPodPullSecret(t *testing.T) {
	n := startPodNode(t)
	reg := n.c.StartRegistry(t)
	ctx := t.Context()
	worker, err := os.ReadFile(agoratest.Worker(agoraBin))
	if err != nil {
		t.Fatal(err)
	}
	tarball, _, err := k8stest.OCIImage("k8stest.invalid/agora-worker:pull", []string{"/agora/bin/agora-worker"},
		k8stest.ImageFile{Path: "/agora/bin/agora-worker", Mode: 0o755, Data: worker})
	if err != nil {
		t.Fatal(err)
	}
	workerRef, err := reg.PushOCI(ctx, tarball, "agora/worker", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	// image_pull_policy Always is every container's: the toolchain comes from the registry too.
	toolchainRef, err := reg.PushPodman(ctx, k8stest.ToolchainImage(t), "agents/toolchain", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in the registry: worker %s, toolchain %s", workerRef, toolchainRef)
	for _, s := range []map[string]any{
		reg.PullSecret(n.c.Namespace, "regcred", reg.User, reg.Password),
		reg.PullSecret(n.c.Namespace, "regcred-wrong", reg.User, "not-"+reg.Password),
	} {
		if err := n.c.Apply(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t)
	e.addPullTargets(n, workerRef, toolchainRef, map[string][]string{
		"pod-regcred": {"regcred"}, "pod-nosecret": nil, "pod-wrong": {"regcred-wrong"},
	})
	e.subagent("writer", `echo writing; printf 'pulled\n' > pulled.txt`)

	r := e.run(dispatch.Request{Subagent: "writer", Target: "pod-regcred", Timeout: 3 * time.Minute})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("with the pull secret: dispatch %s: %s %s: %s\npod logs:\n%s", r.ID, r.State, r.Reason, r.Detail, n.podLogs(t))
	}
	if r.Result == nil || r.Result.Patch == nil || !strings.Contains(e.blob(r.Result.Patch), "+pulled") {
		t.Errorf("the dispatch's patch lacks the agent's file")
	}
	checkPulledFrom(t, n, workerRef)
	checkPulledFrom(t, n, toolchainRef)

	for target, secret := range map[string]string{"pod-nosecret": "", "pod-wrong": "regcred-wrong"} {
		t.Run(target, func(t *testing.T) {
			r := e.run(dispatch.Request{Subagent: "writer", Target: target, Timeout: 3 * time.Minute})
			t.Logf("%s: %s %s: %s", target, r.State, r.Reason, r.Detail)
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed {
				t.Fatalf("dispatch %s: %s %s, want failed provider-failed (the pull refused), not a wait to the timeout", r.ID, r.State, r.Reason)
			}
			for _, want := range []string{"could not pull image " + workerRef, "ErrImagePull", "401", "namespace " + n.c.Namespace} {
				if !strings.Contains(r.Detail, want) {
					t.Errorf("the failure does not say %q: %s", want, r.Detail)
				}
			}
			if secret != "" && !strings.Contains(r.Detail, "image_pull_secrets ["+secret+"]") {
				t.Errorf("the failure does not name the secret to check: %s", r.Detail)
			}
			if secret == "" && !strings.Contains(r.Detail, "no image_pull_secrets") {
				t.Errorf("the failure does not say the target has no pull secret: %s", r.Detail)
			}
			for name, text := range map[string]string{"detail": r.Detail, "logs": e.logs(r.ID)} {
				if strings.Contains(text, reg.Password) {
					t.Errorf("the dispatch's %s holds the registry's password", name)
				}
			}
			waitJobGone(t, n, r.ProviderTaskID)
		})
	}

	// The node no longer trusts the registry's CA: the pull is refused for the certificate,
	// not made without verification (image_pull_policy Always pulls though the node holds
	// the image).
	if err := reg.Distrust(); err != nil {
		t.Fatal(err)
	}
	r = e.run(dispatch.Request{Subagent: "writer", Target: "pod-regcred", Timeout: 3 * time.Minute})
	t.Logf("untrusted: %s %s: %s", r.State, r.Reason, r.Detail)
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed || !strings.Contains(r.Detail, "x509") {
		t.Errorf("with the registry's CA untrusted: dispatch %s: %s %s: %s; want provider-failed naming the certificate (x509)", r.ID, r.State, r.Reason, r.Detail)
	}
}

// addPullTargets adds one kubernetes target per name: the node's, with the images workerRef
// and toolchainRef from the registry, image_pull_policy Always and that name's pull secrets.
func (e *env) addPullTargets(n *podNode, workerRef, toolchainRef string, secrets map[string][]string) {
	var mu sync.Mutex
	providers := map[string]compute.Provider{}
	for name, s := range secrets {
		tg := e.home.Config.Targets[config.DefaultTarget]
		tg.Provider = config.ProviderKubernetes
		tg.Image, tg.WorkerImage = toolchainRef, workerRef
		tg.Kubeconfig, tg.Namespace, tg.Gateway = n.c.Kubeconfig, n.c.Namespace, n.gatewayURL
		tg.ImagePullSecrets, tg.ImagePullPolicy = s, kubernetes.PullAlways
		e.home.Config.Targets[name] = tg
	}
	e.d.RemoteProviders = func(ctx context.Context, name string, tg config.Target) (compute.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p := providers[name]; p != nil {
			return p, nil
		}
		kp, err := kubernetes.New(kubernetes.Options{
			Kubeconfig: tg.Kubeconfig, Namespace: tg.Namespace, Image: tg.Image, WorkerImage: tg.WorkerImage,
			GatewayURL: tg.Gateway, GatewayCA: n.ca, Exporter: n.reg, Target: name,
			PullSecrets: tg.ImagePullSecrets, PullPolicy: tg.ImagePullPolicy,
		})
		if err == nil {
			providers[name] = kp
		}
		return kp, err
	}
}

// checkPulledFrom: the node's containerd holds the worker image by the registry's reference,
// which only a pull from the registry gives it.
func checkPulledFrom(t *testing.T, n *podNode, ref string) {
	t.Helper()
	out, err := n.c.Ctr(t.Context(), "images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), ref) {
		t.Errorf("containerd does not hold %s:\n%s", ref, out)
	}
}

// waitJobGone waits for the Job of task id k8s:NS/NAME to be gone (a refused pull's Job is
// deleted, its pod with it).
func waitJobGone(t *testing.T, n *podNode, taskID string) {
	t.Helper()
	_, name, ok := strings.Cut(taskID, "/")
	if !strings.HasPrefix(taskID, "k8s:") || !ok {
		t.Fatalf("task id %q, want k8s:<namespace>/<job>", taskID)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		var job struct{ Metadata struct{ Name string } }
		err := n.c.Do(ctx, http.MethodGet, "/apis/batch/v1/namespaces/"+n.c.Namespace+"/jobs/"+name, nil, &job)
		var st *k8stest.StatusError
		if errors.As(err, &st) && st.Code == http.StatusNotFound {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Job %s still there after a refused pull (%v)", name, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
