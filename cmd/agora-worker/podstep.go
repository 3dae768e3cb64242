//go:build !agora_worker_exec

package main

import (
	"context"
	"io"

	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// podStep runs a pod's init step: fetch (the mounts, from the gateway) or fill (a
// Kubernetes warm slot's read-only places).
func podStep(ctx context.Context, step string, stderr io.Writer) int {
	if step == "fetch" {
		return workerremote.FetchMain(ctx, stderr)
	}
	return workerremote.FillMain(ctx, stderr)
}
