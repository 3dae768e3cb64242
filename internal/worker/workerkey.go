//go:build !agora_worker_exec

package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
)

// The worker's key (the gateway's side is modelgw/workerkey.go). Anything in the
// sandbox can reach the gateway and report a would_deny; `agora capability suggest` turns
// would_denies into a grant, so the gateway records who could have sent each one. In a learn
// dispatch of a model runtime the worker makes a random key before the first process that is
// not its own (the capabilities' setup scripts, then the runtime) exists, claims the gateway
// with it (the first claim wins, later ones are refused), and sends it with every report.
// The key lives only in the worker's memory: the worker is non-dumpable, so no process of
// the agent's (same uid) can read it from /proc or ptrace, and it is never in an environment,
// a file or an argv. A claim that fails fails the dispatch: a learn dispatch whose evidence
// cannot be told from the agent's does not run.

// claimTimeout bounds the claim; the key's headers are agentrun's (agentrun.WorkerKeyHeader).
const claimTimeout = 15 * time.Second

// claimGateway makes the worker's key and claims the gateway with it, for a learn dispatch
// of a model runtime; it does nothing otherwise. A model runtime is one verify found the
// gateway's socket for (r.gateway), in a pod too: an exec dispatch has no model gateway, and
// in remote mode (a pod, a docker warm slot) its session has no such socket to tunnel to, so
// claiming there failed every exec learn dispatch off the local provider's cold path.
func (r *runner) claimGateway(ctx context.Context) *failure {
	if !r.man.Learn || r.gateway == "" {
		return nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "learn: make the worker's key: %v", err)
	}
	key := hex.EncodeToString(b[:])
	gw := agentrun.Invocation{GatewaySocket: r.gateway, DialHost: r.opts.dialHost}.Gateway()
	defer gw.Close()
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	status, reply, err := gw.Post(ctx, "/worker/claim", map[string]string{"key": key})
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "learn: claim the gateway: %v", err)
	}
	if status != http.StatusNoContent {
		return fail(lifecycle.ReasonWorkerFailed, "learn: claim the gateway: %s", agentrun.GatewayError(status, reply))
	}
	r.workerKey = key
	return nil
}
