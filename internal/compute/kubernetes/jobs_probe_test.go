package kubernetes

import (
	"testing"

	"github.com/agora-dev/agora/internal/k8stest"
)

// TestProbeJobs: doctor's engine probe of a jobs-backend target answers on the shared control
// plane (the refusals are TestProbeEngine_Unreachable's, in cli).
func TestProbeJobs(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	if n, err := ProbeJobs(t.Context(), c.Kubeconfig, "", c.Namespace); err != nil || n < 0 {
		t.Errorf("probe = %d, %v; want a count", n, err)
	}
}
