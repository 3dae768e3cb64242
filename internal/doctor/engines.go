package doctor

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

// engineTimeout bounds each engine's answer: doctor must not hang on an engine or a cluster
// that is down.
const engineTimeout = 10 * time.Second

// engines asks the engine behind each docker target (its socket answers, the pinned image is
// there) and the cluster behind each kubernetes target of the jobs backend (its API server
// answers and lets agora's account list Jobs in the namespace) the question a dispatch would
// ask first (doctor said "config ok" for a docker target whose socket did not exist).
// Required: no dispatch of that target can run without its engine. The agent-sandbox backend
// has its own check (agentSandbox).
func (r *run) engines(o Options) {
	if o.Config == nil || r.h.Engine == nil {
		return
	}
	var names []string
	for name, t := range o.Config.Targets {
		switch {
		case t.Provider == config.ProviderDocker,
			t.Provider == config.ProviderKubernetes && t.Backend != config.BackendAgentSandbox:
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		t := o.Config.Targets[name]
		ctx, cancel := context.WithTimeout(r.ctx, engineTimeout)
		detail, err := r.h.Engine(ctx, t)
		cancel()
		check := "engine-" + name
		if err != nil {
			r.missing(check, fmt.Sprintf("target %s (%s): %v", name, t.Provider, err), engineFix(t), true)
			continue
		}
		r.ok(check, fmt.Sprintf("target %s: %s", name, detail), true)
	}
}

// engineFix says where to look for each provider.
func engineFix(t config.Target) string {
	if t.Provider == config.ProviderDocker {
		return "start the engine (podman's Docker API: make podman prints DOCKER_HOST=...), set docker_host or DOCKER_HOST to its socket, and load the image (make image); see docs/providers.md"
	}
	fix := "check the target's kubeconfig, context and namespace, and apply the Role in docs/providers-k8s.md (examples/kubernetes/rbac.yaml)"
	if len(t.ImagePullSecrets) > 0 {
		fix += "; have the cluster's operator make each of image_pull_secrets in the namespace (kubectl create secret docker-registry NAME -n " + t.Namespace + " ...)"
	}
	return fix
}
