package dispatch_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/agoratest"
)

// waitWorkerStarted waits, through agoratest's poll of the pod's status, until the dispatch's
// worker container has started.
func waitWorkerStarted(b *testing.B, n *podNode, id string) {
	b.Helper()
	agoratest.WaitFor(b, 3*time.Minute, "dispatch "+id+"'s worker to start", func() bool {
		var l corev1.PodList
		if err := n.c.Do(b.Context(), "GET", "/api/v1/namespaces/"+n.c.Namespace+"/pods?labelSelector=agora.dispatch%3D"+id, nil, &l); err != nil {
			b.Fatal(err)
		}
		for _, pod := range l.Items {
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == "worker" && (cs.State.Running != nil || cs.State.Terminated != nil) {
					return true
				}
			}
		}
		return false
	})
}
