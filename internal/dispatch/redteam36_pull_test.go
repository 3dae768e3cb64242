package dispatch_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestRedTeam36_RegistryServesAnotherImageUnderTheDigest (real kubelet, real registry): the
// registry hands out another image's manifest under the worker image's pinned digest (its
// storage rewritten: a compromised registry or mirror). The other image is a working worker
// (the same program, one marker file apart), so had the node run it the dispatch would have
// finished: it must fail instead, provider-failed at the pull, its Job gone, and the node's
// containerd must hold no image under the pinned reference. The digest in agora.yaml is what
// binds the image, not the registry's word. (The node has only the pinned reference to pull by:
// image_pull_policy IfNotPresent, and the worker image is new to it, a random marker in each.)
func TestRedTeam36_RegistryServesAnotherImageUnderTheDigest(t *testing.T) {
	n := startPodNode(t)
	reg := n.c.StartRegistry(t)
	ctx := t.Context()
	worker, err := os.ReadFile(agoratest.Worker(agoraBin))
	if err != nil {
		t.Fatal(err)
	}
	push := func(tag string) string {
		t.Helper()
		marker := make([]byte, 16)
		rand.Read(marker)
		tarball, _, err := k8stest.OCIImage("k8stest.invalid/agora-worker:"+tag, []string{"/agora/bin/agora-worker"},
			k8stest.ImageFile{Path: "/agora/bin/agora-worker", Mode: 0o755, Data: worker},
			k8stest.ImageFile{Path: "/agora/marker-" + tag, Mode: 0o644, Data: []byte(hex.EncodeToString(marker))})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := reg.PushOCI(ctx, tarball, "agora/worker", tag)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	pinned, other := push("pinned"), push("other")
	_, pinnedDigest, _ := strings.Cut(pinned, "@")
	_, otherDigest, _ := strings.Cut(other, "@")
	if err := reg.ServeUnder(otherDigest, pinnedDigest); err != nil {
		t.Fatal(err)
	}
	if err := n.c.Apply(ctx, reg.PullSecret(n.c.Namespace, "regcred", reg.User, reg.Password)); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.addPullTargets(n, pinned, n.toolchain, map[string][]string{"pod-tampered": {"regcred"}})
	tg := e.home.Config.Targets["pod-tampered"]
	tg.ImagePullPolicy = kubernetes.PullIfNotPresent // the toolchain is the node's own import
	e.home.Config.Targets["pod-tampered"] = tg
	e.subagent("writer", `echo writing; printf 'ran\n' > ran.txt`)

	r := e.run(dispatch.Request{Subagent: "writer", Target: "pod-tampered", Timeout: 3 * time.Minute})
	t.Logf("%s %s: %s", r.State, r.Reason, r.Detail)
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonProviderFailed {
		t.Fatalf("dispatch %s: %s %s, want failed provider-failed at the pull: the node ran what the registry served under %s\npod logs:\n%s",
			r.ID, r.State, r.Reason, pinnedDigest, n.podLogs(t))
	}
	for _, want := range []string{"could not pull image " + pinned, "ErrImagePull"} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("the failure does not say %q: %s", want, r.Detail)
		}
	}
	if strings.Contains(r.Detail, reg.Password) || strings.Contains(e.logs(r.ID), reg.Password) {
		t.Errorf("the dispatch's record or logs hold the registry's password")
	}
	waitJobGone(t, n, r.ProviderTaskID)
	out, err := n.c.Ctr(ctx, "images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), pinnedDigest) {
		t.Errorf("containerd holds an image under %s, which the registry served other content for:\n%s", pinnedDigest, out)
	}
}
