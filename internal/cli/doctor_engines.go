package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/config"
)

// probeEngine is doctor's engine check: a docker target's provider is built exactly as a
// dispatch builds it (the engine answers, the pinned image is present; nothing pulled or
// started), a kubernetes target's cluster is asked to list agora's Jobs under its Role.
func probeEngine(ctx context.Context, t config.Target) (string, error) {
	if t.Provider == config.ProviderKubernetes {
		n, err := kubernetes.ProbeJobs(ctx, t.Kubeconfig, t.Context, t.Namespace)
		if err != nil {
			return "", err
		}
		if err := kubernetes.ProbePullSecrets(ctx, t.Kubeconfig, t.Context, t.Namespace, t.ImagePullSecrets); err != nil {
			return "", err
		}
		rc, err := runtimeClassDetail(ctx, t)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("the API server answers and agora's account lists Jobs in namespace %s (%d of agora's there now)%s%s", t.Namespace, n, pullDetail(t), rc), nil
	}
	p, err := newContainerProvider(ctx, t)
	if err != nil {
		return "", err
	}
	if c, ok := p.(io.Closer); ok {
		c.Close()
	}
	return fmt.Sprintf("the engine at %s answers and holds image %s", dockerHostOf(t), t.Image), nil
}

// dockerHostOf names the engine a docker target talks to, as the provider picks it.
func dockerHostOf(t config.Target) string {
	switch {
	case t.DockerHost != "":
		return t.DockerHost
	case os.Getenv("DOCKER_HOST") != "":
		return os.Getenv("DOCKER_HOST")
	}
	return "the default socket (unix:///var/run/docker.sock)"
}

// runtimeClassDetail checks a kubernetes target's runtime_class (kubernetes.ProbeRuntimeClass)
// and says what doctor found.
func runtimeClassDetail(ctx context.Context, t config.Target) (string, error) {
	if t.RuntimeClass == "" {
		return "", nil
	}
	checked, err := kubernetes.ProbeRuntimeClass(ctx, t.Kubeconfig, t.Context, t.RuntimeClass)
	switch {
	case err != nil:
		return "", err
	case !checked:
		return fmt.Sprintf("; runtime_class %s not checked: agora's account may not get runtimeclasses (the ClusterRole in docs/providers-k8s.md)", t.RuntimeClass), nil
	}
	return fmt.Sprintf("; RuntimeClass %s exists", t.RuntimeClass), nil
}

// pullDetail names the image pull secrets doctor found to be registry credentials.
func pullDetail(t config.Target) string {
	if len(t.ImagePullSecrets) == 0 {
		return ""
	}
	return fmt.Sprintf("; image pull secrets %s exist and are registry credentials", strings.Join(t.ImagePullSecrets, ", "))
}
