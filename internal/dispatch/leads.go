package dispatch

import (
	"errors"

	"github.com/agora-dev/agora/internal/store"
)

// leads says whether this process may act on the home's dispatches as a whole: reap the
// ones whose supervisor is gone, cancel one, keep Kubernetes warm pools. In a home without a
// leader lease every process may. In a home with one (leader: in agora.yaml) only the
// leader and the processes it starts may: they run under its fence (store.SetFence). Any
// other process of such a home (`agora mcp`, a CLI on a standby replica's pod, a replica that
// led once) reads an agora.db that may be a stale copy: the dispatches it lists as live may
// be the leader's, adopted since, and reaping or cancelling them would end and stop the
// leader's work. Its Kubernetes dispatches start cold too: the home's identity
// on its Kubernetes objects is its audit key alone, the same for every copy of the home, so
// its pool keeper would adopt the leader's pool by name and delete it at its close.
func (d *Dispatcher) leads() bool {
	return d.Config == nil || !d.Config.Leader.Set() || store.Fenced()
}

// ErrNotLeader is Cancel's refusal in a process that does not lead its home (see leads).
var ErrNotLeader = errors.New("this home runs under a leader lease (leader: in agora.yaml) and this process is not the leader: cancel through the leader's MCP server (agora_dispatch_cancel) or web view")
