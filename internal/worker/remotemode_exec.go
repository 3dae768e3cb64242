//go:build agora_worker_exec

package worker

import (
	"context"
	"fmt"
	"os"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// remoteMode says the worker was started in a pod (remotemode.go), which the exec-only
// worker refuses: its build has no network gateway client, and the host binds it only into
// a local sandbox.
func remoteMode() bool { return os.Getenv(remote.GatewayURLEnv) != "" }

func runRemote(_ context.Context, opts options) int {
	fmt.Fprintln(opts.Stderr, "agora worker: error: this is the exec-only worker (agora-worker-exec), which runs in a local sandbox only; a pod runs agora-worker")
	return 1
}
