package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// The attack: claim a pool pod with a dispatch whose mounts are not the pod's places (a place
// the pod lacks, a file where it has a directory, a place the dispatch lacks, a writable mount
// outside /agora or over the filler's place). Its worker would find a read-only mount with
// nothing filled in it, or a mount it cannot make: each is refused before the bind (Pool.Claim
// exports, then checks with checkSlotMounts), and the dispatch starts cold.
func TestCheckSlotMounts(t *testing.T) {
	places := []remote.SlotPlace{{Dst: "/agora/bundle"}}
	bundle := remote.Mount{Name: "bundle", Dst: "/agora/bundle"}
	out := remote.Mount{Name: "out", Dst: "/agora/out", Writable: true, Result: true}
	for _, tc := range []struct {
		name string
		ms   []remote.Mount
		ok   bool
	}{
		{"as made", []remote.Mount{bundle, out}, true},
		{"no place mounted", []remote.Mount{out}, false},
		{"file for a directory", []remote.Mount{{Name: "bundle", Dst: "/agora/bundle", File: true}, out}, false},
		{"a place the pod lacks", []remote.Mount{bundle, {Name: "inputs", Dst: "/agora/inputs"}, out}, false},
		{"writable outside /agora", []remote.Mount{bundle, {Name: "x", Dst: "/work", Writable: true}}, false},
		{"writable below a place", []remote.Mount{bundle, {Name: "x", Dst: "/agora/bundle/x", Writable: true}}, false},
		{"the filler's place", []remote.Mount{bundle, {Name: "fill", Dst: fillDir, Writable: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkSlotMounts(tc.ms, places); (err == nil) != tc.ok {
				t.Errorf("checkSlotMounts = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// The attack: a tenant who may update pods sets a waiting pool pod's filler (or worker) image
// to theirs and back; the kubelet restarts the container each time, so their image ran with
// the places' writable side while the stored pod is as made again. What is left of it is the
// restart count: a pod any container of which restarted is never claimed (Pool.Claim asks
// fillerWaits), nor one whose filler ended.
func TestFillerWaits(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	pod := func(init, worker, fill corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{init},
			ContainerStatuses: []corev1.ContainerStatus{worker, fill}}}
	}
	initDone := corev1.ContainerStatus{Name: "fetch", State: ended}
	worker := corev1.ContainerStatus{Name: "worker", State: running}
	fill := corev1.ContainerStatus{Name: fillContainer, State: running}
	restarted := func(s corev1.ContainerStatus) corev1.ContainerStatus { s.RestartCount = 1; return s }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"as made", pod(initDone, worker, fill), true},
		{"filler restarted", pod(initDone, worker, restarted(fill)), false},
		{"worker restarted", pod(initDone, restarted(worker), fill), false},
		{"init restarted", pod(restarted(initDone), worker, fill), false},
		{"filler ended", pod(initDone, worker, corev1.ContainerStatus{Name: fillContainer, State: ended}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fillerWaits(tc.pod); got != tc.want {
				t.Errorf("fillerWaits = %v, want %v", got, tc.want)
			}
		})
	}
}
