package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/config"
)

// newContainerProvider builds the provider of a `provider: docker` target: the engine at
// docker_host (else $DOCKER_HOST), the target's image pinned by digest (present on the
// engine; never pulled), its runtime and resources.cpu. The worker program the dispatcher
// binds at /agora/bin/agora-worker is the container's fdpass shim.
func newContainerProvider(ctx context.Context, t config.Target) (compute.Provider, error) {
	if t.Resources.Memory != "" {
		return nil, fmt.Errorf("resources.memory is not read by a docker target; its memory limit is the target's memory setting")
	}
	cpus, err := dockerCPUs(t.Resources.CPU)
	if err != nil {
		return nil, err
	}
	return container.New(ctx, container.Options{
		Host:    t.DockerHost,
		Image:   t.Image,
		Runtime: t.Runtime,
		CPUs:    cpus,
	})
}

// dockerCPUs reads a CPU quantity as a number of CPUs: "2", "1.5" or "500m"; empty is no cap.
func dockerCPUs(q config.Quantity) (float64, error) {
	s := string(q)
	if s == "" {
		return 0, nil
	}
	milli := strings.HasSuffix(s, "m")
	num := strings.TrimSuffix(s, "m")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || strings.ContainsAny(num, "kMGTi") {
		return 0, fmt.Errorf("resources.cpu %q: want a number of CPUs such as 2, 1.5 or 500m", s)
	}
	if milli {
		v /= 1000
	}
	return v, nil
}
