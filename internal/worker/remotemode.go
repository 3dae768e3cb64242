//go:build !agora_worker_exec

package worker

import (
	"context"
	"fmt"

	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// remoteMode says the worker runs in a pod, reaching the host through the network gateway.
func remoteMode() bool { return workerremote.Enabled() }

// runRemote runs the worker in a pod that reaches the host through agora's network gateway
// (internal/worker/remote): the gateway's token leaves the environment before anything of
// the agent runs, the host's sockets are tunnelled, the secrets object arrives through the
// gateway instead of a descriptor, the output is teed back, and once result.json is written
// and every agent process stopped, the out directory is uploaded. The limits the local
// provider applies with prlimit come from the pod's AGORA_RLIMITS. A failed upload is a
// failed worker: the host has no result. A gateway that did not answer across the worker's
// retries ends it with remote.ExitGatewayUnreachable, which the host records as such.
func runRemote(ctx context.Context, opts options) int {
	// The signal drop first: its runtime thread is made before the process count is
	// lowered under it.
	if opts.awaitSignals != nil {
		opts.awaitSignals()
	}
	// A pod has no setting for these limits: the worker lowers them on itself first, and
	// everything of the agent inherits them (internal/worker/remote/rlimit.go).
	if err := workerremote.ApplyRlimits(); err != nil {
		fmt.Fprintf(opts.Stderr, "agora worker: error: %v\n", err)
		return 1
	}
	start := workerremote.Start
	if workerremote.SlotEnabled() {
		// A warm slot's worker: it claims its dispatch, then fetches its files itself.
		start = workerremote.StartSlot
	}
	rw, err := start(ctx, opts.Root, opts.Stdout, opts.Stderr)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "agora worker: error: gateway: %v\n", err)
		return workerremote.ExitCode(err)
	}
	opts.SecretsFile, opts.Stdout, opts.Stderr = rw.SecretsFile, rw.Stdout, rw.Stderr
	opts.secretsFD = 0 // no descriptor from the host in a pod
	opts.dialHost = rw.DialSocket
	code := run(ctx, opts)
	if err := rw.Finish(ctx); err != nil {
		return workerremote.ExitCode(err)
	}
	return code
}
