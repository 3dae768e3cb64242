package doctor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

// agentSandboxTimeout bounds each cluster's answer: doctor must not hang on a cluster that is
// down.
const agentSandboxTimeout = 10 * time.Second

// ErrNoAgentSandbox is what [Host.AgentSandbox] wraps when the cluster lacks agent-sandbox's
// CRD; the check's fix then says to install it.
var ErrNoAgentSandbox = errors.New("agent-sandbox CRD missing")

// agentSandbox checks, for each kubernetes target with backend: agent-sandbox, that its
// cluster serves agent-sandbox's Sandboxes (a clear error naming the missing CRD), and says
// how many of agora's Sandboxes are there. Required: no dispatch of that target can run
// without it.
func (r *run) agentSandbox(o Options) {
	if o.Config == nil || r.h.AgentSandbox == nil {
		return
	}
	var names []string
	for name, t := range o.Config.Targets {
		if t.Provider == config.ProviderKubernetes && t.Backend == config.BackendAgentSandbox {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		t := o.Config.Targets[name]
		ctx, cancel := context.WithTimeout(r.ctx, agentSandboxTimeout)
		n, err := r.h.AgentSandbox(ctx, t)
		cancel()
		check := "agent-sandbox-" + name
		switch {
		case errors.Is(err, ErrNoAgentSandbox):
			r.missing(check, fmt.Sprintf("target %s (namespace %s): %v", name, t.Namespace, err),
				"install kubernetes-sigs/agent-sandbox (v0.5.x: its CRDs and controller) in the cluster, or set backend: jobs", true)
		case err != nil:
			r.missing(check, fmt.Sprintf("target %s (namespace %s): %v", name, t.Namespace, err),
				"check the target's kubeconfig and the Role in docs/providers-k8s.md", true)
		default:
			r.ok(check, fmt.Sprintf("target %s: agent-sandbox serves Sandboxes in namespace %s; %d of agora's there now; no warm pool (not built)", name, t.Namespace, n), true)
		}
	}
}
