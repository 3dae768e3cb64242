package lease

import (
	"testing"

	"github.com/agora-dev/agora/internal/k8stest"
)

// TestMain shares one control plane between the Lease tests and stops it at the end.
func TestMain(m *testing.M) { k8stest.Main(m) }
