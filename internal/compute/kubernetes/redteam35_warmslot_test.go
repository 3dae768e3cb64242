package kubernetes

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An attack on a slot's filler, which holds its read-only places writable. A tenant of
// the namespace who may patch pods (not exec) sets the waiting slot's filler image to one of
// theirs and back. The kubelet restarts a container whose spec changed whatever the pod's
// restartPolicy, so the tenant's image runs with the places' writable side (planting files the
// dispatch's read-only bundle would then show, a FIFO at a file place's entry) and with the
// Secret as it was at that restart; the pod as stored is the one agora made again, so the
// containers' hash matches. What is left is the container's restart count: a slot pod of
// restartPolicy Never whose container restarted was changed, and must never be claimed.
func TestRedTeam35_SlotContainerRestartedNeverClaimed(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	for _, name := range []string{fillContainer, workerContainer} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sl := startSlotPlaces(t, p, g, warmSpec(t, "TEMPLATE"), warmPlaces)
			if err := sl.Check(t.Context()); err != nil {
				t.Fatalf("a fresh slot fails its check: %v", err)
			}
			pod, err := sl.findPod(t.Context())
			if err != nil || pod == nil {
				t.Fatalf("slot pod: %v", err)
			}
			cs := fullClient(t)
			image := ""
			for _, c := range pod.Spec.Containers {
				if c.Name == name {
					image = c.Image
				}
			}
			for _, img := range []string{"registry.example/tenant@sha256:" + fmt.Sprintf("%064d", 7), image} {
				patch := fmt.Appendf(nil, `{"spec":{"containers":[{"name":%q,"image":%q}]}}`, name, img)
				if _, err := cs.CoreV1().Pods(p.ns).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatalf("patch the %s container's image: %v", name, err)
				}
			}
			// What a real kubelet reports after the two restarts (kwok runs no container).
			pod, err = cs.CoreV1().Pods(p.ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range pod.Status.ContainerStatuses {
				if st := &pod.Status.ContainerStatuses[i]; st.Name == name {
					st.RestartCount = 2
					st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
				}
			}
			if _, err := cs.CoreV1().Pods(p.ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("report the restarts: %v", err)
			}
			select {
			case <-sl.Gone():
			case <-time.After(time.Minute):
				t.Fatal("the slot's pod watch did not see the restarted container in a minute")
			}
			refusedBeforeBind(t, sl)
		})
	}
}
