package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/dispatchcmd"
	"github.com/agora-dev/agora/internal/cli/doctorcmd"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/doctor"
)

// doctorProbes are what agora doctor asks of the providers and the resident dispatcher.
func doctorProbes(f *cmdutil.Factory) doctorcmd.Probes {
	return doctorcmd.Probes{Host: doctorHost(), Resident: func(c *config.Config) doctor.Check { return dispatchcmd.ResidentCheck(f, c) }}
}

// doctorHost is the real host, with the agent-sandbox probe of kubernetes targets and the
// engine probe of docker and kubernetes targets.
func doctorHost() doctor.Host {
	h := doctor.System()
	h.AgentSandbox = func(ctx context.Context, t config.Target) (int, error) {
		n, err := kubernetes.ProbeAgentSandbox(ctx, t.Kubeconfig, t.Context, t.Namespace)
		if errors.Is(err, kubernetes.ErrNoSandboxCRD) {
			return 0, fmt.Errorf("%w: %w", doctor.ErrNoAgentSandbox, err)
		}
		if err != nil {
			return n, err
		}
		// The engine check skips agent-sandbox targets; their Sandboxes' pods pull the same way,
		// and name the same RuntimeClass.
		if err := kubernetes.ProbePullSecrets(ctx, t.Kubeconfig, t.Context, t.Namespace, t.ImagePullSecrets); err != nil {
			return n, err
		}
		_, err = runtimeClassDetail(ctx, t)
		return n, err
	}
	h.Engine = probeEngine
	return h
}
