//go:build agora_worker_exec

package main

import (
	"context"
	"fmt"
	"io"
)

// podStep refuses in the exec-only worker (agora-worker-exec): a pod runs agora-worker, whose
// build has the network gateway's client.
func podStep(_ context.Context, step string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "agora-worker: worker %s runs in a pod, which runs agora-worker; this is the exec-only worker (agora-worker-exec)\n", step)
	return 1
}
