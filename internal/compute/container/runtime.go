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
//
// The engine's /_ping says so in its headers. /version is asked only when they do not tell:
// podman answers it by building its whole system info, each package's version looked up
// with dpkg or rpm, which costs half a second and tens of ms of CPU a provider.
func isPodman(ctx context.Context, cli *client.Client) (bool, error) {
	if h, err := pingHeaders(ctx, cli); err == nil {
		switch {
		case h.Get("Libpod-Api-Version") != "":
			return true, nil
		case strings.HasPrefix(h.Get("Server"), "Docker/"):
			return false, nil
		}
	}
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

// pingHeaders are the headers of the engine's answer to GET /_ping (the client's own Ping
// does not return them).
func pingHeaders(ctx context.Context, cli *client.Client) (http.Header, error) {
	resp, err := engineGet(ctx, cli, "/_ping")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ping: HTTP %d", resp.StatusCode)
	}
	return resp.Header, nil
}

// engineGet sends GET path to the engine over the client's own connection to it, for what
// the client has no call for. The caller closes the body.
func engineGet(ctx context.Context, cli *client.Client, path string) (*http.Response, error) {
	dial := cli.Dialer()
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine"+path, nil)
	if err != nil {
		return nil, err
	}
	return (&http.Client{Transport: tr}).Do(req)
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
	resp, err := engineGet(ctx, p.cli, "/v4.0.0/libpod/containers/"+id+"/json")
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
