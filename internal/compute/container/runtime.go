package container

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/moby/moby/client"
)

// maxLibpodInspect caps podman's own inspect answer, which is read whole.
const maxLibpodInspect = 4 << 20

// isPodman reports whether the engine is podman's Docker-compatible service, which differs
// in two ways that matter here: it reads a seccomp profile from a path, and it ignores
// HostConfig.Runtime (the runtime is its service's default).
func isPodman(ctx context.Context, cli *client.Client) (bool, error) {
	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return false, fmt.Errorf("ask the container engine its version: %w", err)
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return true, nil
		}
	}
	return false, nil
}

// checkRuntime refuses a container the engine did not give the runtime asked for: a
// target that says runsc must never run under runc because the engine dropped the field.
func (p *Provider) checkRuntime(ctx context.Context, id string) error {
	got, err := p.ociRuntime(ctx, id)
	if err != nil {
		return fmt.Errorf("check the container's runtime: %w", err)
	}
	if got != p.runtime {
		hint := ""
		if p.podman {
			hint = " (podman's Docker API ignores the runtime it is asked for: use a podman service whose default runtime is " + p.runtime + ", e.g. the second socket scripts/podman.sh starts)"
		}
		return fmt.Errorf("the engine gave the container runtime %q, not %q%s", got, p.runtime, hint)
	}
	return nil
}

// ociRuntime is the OCI runtime the engine gave container id.
func (p *Provider) ociRuntime(ctx context.Context, id string) (string, error) {
	if !p.podman {
		ins, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return "", err
		}
		if ins.Container.HostConfig == nil {
			return "", nil
		}
		return ins.Container.HostConfig.Runtime, nil
	}
	// podman's compatible inspect says "oci" whatever ran; its own API names the runtime.
	dial := p.cli.Dialer()
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podman/v4.0.0/libpod/containers/"+id+"/json", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("podman inspect: HTTP %d", resp.StatusCode)
	}
	var v struct {
		OCIRuntime string
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxLibpodInspect)).Decode(&v); err != nil {
		return "", fmt.Errorf("podman inspect: %w", err)
	}
	return v.OCIRuntime, nil
}
