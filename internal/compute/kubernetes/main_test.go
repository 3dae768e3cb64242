package kubernetes

import (
	"os"
	"testing"

	"github.com/agora-dev/agora/internal/k8stest"
)

// TestMain shares one control plane between the cluster tests and stops it at the end.
func TestMain(m *testing.M) {
	if os.Getenv(poolClaimerEnv) != "" {
		os.Exit(poolClaimerMain()) // a supervisor killed with -9 after its claim (pool_cluster_test.go)
	}
	if os.Getenv(slotHolderEnv) != "" {
		os.Exit(slotHolderMain()) // a warm slot's holder, to be killed with -9 (warmslot_cluster_test.go)
	}
	if os.Getenv(slotClaimerEnv) != "" {
		os.Exit(slotClaimerMain()) // a warm slot's supervisor killed with -9 once bound (warmslot_adopt_cluster_test.go)
	}
	k8stest.Main(m)
}
