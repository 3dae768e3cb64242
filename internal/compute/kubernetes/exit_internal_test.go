package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// TestExitOf_OOMKilledIsTheWorkersOnlyWhenItDidNotExit0: the runtime says OOMKilled when the
// OOM killer took any process of the worker's container (the agent's, which allocated past
// the pod's limit); a worker that exited 0 after that vouches for its result, and one that
// did not is killed.
func TestExitOf_OOMKilledIsTheWorkersOnlyWhenItDidNotExit0(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    corev1.ContainerStateTerminated
		want compute.Exit
	}{
		{"agent OOM-killed, worker exited 0", corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 0}, compute.Exit{Code: 0}},
		{"worker OOM-killed", corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}, compute.Exit{Code: -1, Signal: "killed"}},
		{"OOMKilled, worker failed", corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 1}, compute.Exit{Code: -1, Signal: "killed"}},
		{"completed", corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0}, compute.Exit{Code: 0}},
		{"worker failed", corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3}, compute.Exit{Code: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitOf(&tc.t); got != tc.want {
				t.Errorf("exitOf(%s %d) = %+v, want %+v", tc.t.Reason, tc.t.ExitCode, got, tc.want)
			}
		})
	}
}
