package kubernetes

import (
	"fmt"

	"github.com/agora-dev/agora/internal/fence"
)

// fenced is the leader fence (internal/fence) asked before each delete this provider makes
// in the namespace: nil while this process may act (no fence, or an open one).
//
// A process whose leader lost its lease (a fenced supervisor or standby, a serve
// winding down after the loss) must take no end effect on the cluster, not only commit
// nothing. Since the home's identity is its audit key alone (dispatch.k8sHomes), the new
// leader's warm pools (whose names hash the home) and their policies carry the very labels
// and names the old leader's sweeps and closes select, and the Jobs,
// Sandboxes and claims of the dispatches the new leader adopted are the old supervisors' own:
// every delete path (sweeps, a pool's close, a Sandbox's or claim's end, Cancel, deleteJob)
// asks here.
func fenced(what string) error {
	if err := fence.Check(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
