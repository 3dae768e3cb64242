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
	if os.Getenv(poolHolderEnv) != "" {
		os.Exit(poolHolderMain()) // a pool's holder killed with -9 (pool_orphan_cluster_test.go)
	}
	k8stest.Main(m)
}
