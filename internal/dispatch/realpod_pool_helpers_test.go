package dispatch_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// waitWorkerStarted polls the dispatch's pod until its worker container has started.
func waitWorkerStarted(b *testing.B, n *podNode, id string) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var l corev1.PodList
		if err := n.c.Do(b.Context(), "GET", "/api/v1/namespaces/"+n.c.Namespace+"/pods?labelSelector=agora.dispatch%3D"+id, nil, &l); err != nil {
			b.Fatal(err)
		}
		for _, pod := range l.Items {
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == "worker" && (cs.State.Running != nil || cs.State.Terminated != nil) {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("dispatch %s: its worker did not start in 3m", id)
}
