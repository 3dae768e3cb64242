//go:build agora_worker_exec

package adapters

import (
	"github.com/agora-dev/agora/internal/runtime/execrt/execadapter"
	"github.com/agora-dev/agora/internal/runtime/execrt/execdef"
)

// table is the exec-only worker's (cmd/agora-worker built with the agora_worker_exec tag,
// installed as agora-worker-exec): exec's adapter alone, so the worker of an exec dispatch
// links no model runtime and no HTTP client, and starts in about a millisecond less
// (docs/adr/0035-an-exec-dispatch-runs-an-exec-only-worker.md).
func table() []entry {
	return []entry{{execdef.Name, execadapter.Adapter{}}}
}
