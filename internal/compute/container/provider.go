package container

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/compute"
)

// DefaultShimPath is where agora's worker program is inside the container (wire.BinPath):
// the dispatcher binds it there, and the provider runs its fdpass command from it.
const DefaultShimPath = "/agora/bin/agora-worker"

// RuntimeRunsc is the gVisor runtime's name in the engine's runtimes table.
const RuntimeRunsc = "runsc"

// Options configures a [Provider].
type Options struct {
	// Host is the engine's address in DOCKER_HOST form ("unix:///run/podman.sock",
	// "tcp://HOST:PORT"). Empty means the DOCKER_HOST environment variable, and the
	// engine's default socket when that is unset too.
	Host string
	// Image is the image every container is created from, pinned by digest:
	// "REF@sha256:<64 hex>". Required; it must already be present on the engine.
	Image string
	// Runtime is the OCI runtime: "" (the engine's default) or "runsc" (gVisor).
	Runtime string
	// CPUs caps the container's CPU time, in CPUs (1.5 = one and a half). 0 means no cap.
	CPUs float64
	// ShimPath is the worker program's path inside the container. Empty means
	// [DefaultShimPath].
	ShimPath string
}

// Provider runs [compute.Spec]s in containers. It is safe for concurrent use.
type Provider struct {
	cli      *client.Client
	image    Image
	imageID  string // what containers are created from: exactly the image inspected at New
	runtime  string
	nanoCPUs int64
	shim     string
	seccomp  string // the security option that applies agora's seccomp profile
	podman   bool
}

var _ compute.Provider = (*Provider)(nil)

// New connects to the engine, negotiating the API version (podman speaks 1.41), and checks
// that o.Image is present there. It never pulls an image.
func New(ctx context.Context, o Options) (*Provider, error) {
	img, err := ParseImage(o.Image)
	if err != nil {
		return nil, err
	}
	if o.Runtime != "" && o.Runtime != RuntimeRunsc {
		return nil, fmt.Errorf("runtime %q is not supported; want %q or none", o.Runtime, RuntimeRunsc)
	}
	if o.CPUs < 0 || math.IsNaN(o.CPUs) || math.IsInf(o.CPUs, 0) || o.CPUs > 1024 {
		return nil, fmt.Errorf("cpus %v out of range; want 0 (no cap) up to 1024", o.CPUs)
	}
	shim := cmp.Or(o.ShimPath, DefaultShimPath)
	host := cmp.Or(o.Host, os.Getenv("DOCKER_HOST"), client.DefaultDockerHost)
	// No connection is kept for reuse: the client's Close only closes idle connections, so
	// one a request still held (a container's wait, a log stream) went idle after Close and
	// stayed open with its reader goroutines. A connection a request costs tens of µs on
	// the engine's socket. An empty TLSNextProto keeps HTTP/2 off, as on the client's own
	// transport: with it on, the transport's copy gains a TLS configuration, and the client
	// then speaks https to a plain socket.
	tr := &http.Transport{DisableKeepAlives: true, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	hc := &http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}
	cli, err := client.New(client.WithHTTPClient(hc), client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", host, err)
	}
	id, err := inspectImage(ctx, cli, img)
	if err != nil {
		cli.Close()
		return nil, err
	}
	podman, err := isPodman(ctx, cli)
	if err != nil {
		cli.Close()
		return nil, err
	}
	sec, err := seccompOpt(podman)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &Provider{
		cli: cli, image: img, imageID: id, runtime: o.Runtime,
		nanoCPUs: int64(o.CPUs * 1e9), shim: shim, seccomp: sec, podman: podman,
	}, nil
}

// inspectImage finds img on the engine by its full reference, then by its digest alone,
// and returns the image id containers are created from. Inspecting by digest covers
// engines that index a local build's manifest digest but not the name@digest form.
func inspectImage(ctx context.Context, cli *client.Client, img Image) (string, error) {
	var firstErr error
	for _, ref := range []string{img.String(), img.Name[:nameEnd(img.Name)] + "@" + img.Digest} {
		res, err := cli.ImageInspect(ctx, ref)
		if err == nil {
			if res.ID == "" {
				return "", fmt.Errorf("inspect image %q: the engine returned no id", img)
			}
			return res.ID, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("inspect image %q: %w", img, err)
		}
		firstErr = cmp.Or(firstErr, err)
	}
	return "", fmt.Errorf("image %q is not present on the container engine (agora never pulls; load or build it first, e.g. scripts/images.sh): %w", img, firstErr)
}

// nameEnd is the length of a reference's repository, without a tag: the last ":" after the
// last "/" starts the tag (an earlier ":" is a registry port).
func nameEnd(name string) int {
	slash := -1
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			slash = i
			break
		}
	}
	for i := len(name) - 1; i > slash; i-- {
		if name[i] == ':' {
			return i
		}
	}
	return len(name)
}

// Close releases the engine connection.
func (p *Provider) Close() error { return p.cli.Close() }

// isNotFound reports whether the engine said the object does not exist.
func isNotFound(err error) bool { return err != nil && cerrdefs.IsNotFound(err) }

// isConflict reports whether the engine refused because of the object's state (killing a
// container that is not running, removing one being removed).
func isConflict(err error) bool {
	return err != nil && (cerrdefs.IsConflict(err) || errors.Is(err, cerrdefs.ErrConflict))
}
