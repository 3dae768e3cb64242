//go:build agora_worker_exec

package worker

import (
	"context"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// claimGateway, in the exec-only worker, has nothing to claim: an exec dispatch has no model
// gateway (workerkey.go). A manifest naming one is a model runtime's, which this build
// cannot run; the host never binds it there, and it fails rather than run unclaimed.
func (r *runner) claimGateway(context.Context) *failure {
	if !r.man.Learn || r.gateway == "" {
		return nil
	}
	return fail(lifecycle.ReasonWorkerFailed, "learn: this worker is the exec-only build (agora-worker-exec) and has no gateway client; the host binds agora-worker for a model runtime")
}
