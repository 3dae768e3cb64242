package kubernetes

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRedTeam38_PodExitOnlyTheJobsPod (adoption follows a Job by its uid's pods):
// a pod that wears the Job's controller-uid label but is not controlled by the Job (anyone who
// may create pods in the namespace can label one so) does not say how the Job ended: a failed
// Job's exit is read from its own pod only, and with no pod of its own it is lost, not the
// forged pod's exit code. Failed before: the forged pod's exit 3 was the dispatch's.
func TestRedTeam38_PodExitOnlyTheJobsPod(t *testing.T) {
	p, cs := testProvider(t, &fakeExporter{})
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "agora-x", Namespace: p.ns, UID: "job-uid"}}
	terminated := func(code int32) corev1.PodStatus {
		return corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: workerContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}}
	}
	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: p.ns,
		Labels: map[string]string{batchv1.ControllerUidLabel: "job-uid"}}, Status: terminated(3)}
	if _, err := cs.CoreV1().Pods(p.ns).Create(t.Context(), forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &handle{p: p, uid: job.UID}
	if exit := h.podExit(t.Context(), job); !exit.Lost || exit.Code == 3 {
		t.Errorf("a pod the Job does not control gave the Job's exit: %+v", exit)
	}
	yes := true
	own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: p.ns,
		Labels:          map[string]string{batchv1.ControllerUidLabel: "job-uid"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "agora-x", UID: "job-uid", Controller: &yes}}},
		Status: terminated(7)}
	if _, err := cs.CoreV1().Pods(p.ns).Create(t.Context(), own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if exit := h.podExit(t.Context(), job); exit.Lost || exit.Code != 7 {
		t.Errorf("the Job's own pod's exit was not read: %+v", exit)
	}
}
