package kubernetes

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Two concurrent dispatches' pods, as the cluster admitted them in a namespace enforcing Pod
// Security "restricted", run as two different uids, each its dispatch's own, and carry the
// limits their workers apply (RLIMIT_NPROC counts per uid on a node: pods that share one
// starve each other).
func TestCluster_PodsRunAsTheirOwnUID(t *testing.T) {
	p, _ := clusterProvider(t, &fakeExporter{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ids := []string{clusterID("UIDA"), clusterID("UIDB")}
	var handles []compute.Handle
	for _, id := range ids {
		s := testSpec(id)
		s.Limits.MaxProcs = 64
		h, err := p.Start(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	uids := map[int64]string{}
	for _, id := range ids {
		pod := waitPod(t, p, id)
		sc := pod.Spec.SecurityContext
		want := int64(compute.SandboxUIDFor(DefaultSandboxUID, id))
		if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != want || *sc.RunAsGroup != want {
			t.Fatalf("admitted pod of %s: security context %+v, want uid and gid %d", id, sc, want)
		}
		t.Logf("dispatch %s: admitted pod %s runs as %d:%d", id, pod.Name, *sc.RunAsUser, *sc.RunAsGroup)
		if other, ok := uids[want]; ok {
			t.Errorf("the pods of %s and %s share uid %d", id, other, want)
		}
		uids[want] = id
		if got := envValue(pod.Spec.Containers[0], remote.RlimitsEnv); got != "nproc=64,fsize=1073741824,nofile=4096" {
			t.Errorf("admitted pod of %s: %s=%q", id, remote.RlimitsEnv, got)
		}
	}
	cancel()
	for _, h := range handles {
		waitTimeout(t, h, 3*time.Minute)
	}
}

// waitPod waits up to 3 minutes (a loaded host's Job controller is slow) for the dispatch's
// pod to exist, and returns it as the apiserver admitted it.
func waitPod(t *testing.T, p *Provider, id string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	agoratest.Eventually(t, 3*time.Minute, "the pod of "+id, func() error {
		pods, err := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		pod = pods.Items[0]
		return nil
	})
	return pod
}
