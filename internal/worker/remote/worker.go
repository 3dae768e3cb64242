package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Limits of the worker's side.
const (
	// MaxSecretsFile caps spec.Files[0] (the worker's own cap on the secrets object is 1 MiB).
	MaxSecretsFile = 1<<20 + 1
	// maxTunnels caps the tunnels the worker carries at once; more connections are closed.
	// It is the gateway's cap per dispatch (netgw.MaxTunnels).
	maxTunnels = 128
	// startGrace is how much longer than OutageLimit the session's start (reading it and the
	// secrets) may take.
	startGrace = time.Minute
	// uploadTimeout bounds the upload of the result mounts, retries across a gateway's
	// outage included.
	uploadTimeout = 10 * time.Minute
)

// Enabled reports whether the worker runs in remote mode: the pod's environment names a
// gateway.
func Enabled() bool { return os.Getenv(remote.GatewayURLEnv) != "" }

// Worker is the worker's remote mode for one run: the tunnels it serves, the secrets it
// read, the streams it tees. The caller runs the worker with [Worker.SecretsFile],
// [Worker.Stdout] and [Worker.Stderr], then calls [Worker.Finish].
type Worker struct {
	c    *Client
	info *remote.Info
	root string
	// SecretsFile is spec.Files[0] (the secrets object) as a pipe, nil when the host passed
	// none.
	SecretsFile *os.File
	// Stdout and Stderr tee the worker's output to the container log (the writers Start was
	// given) and to the gateway's streams.
	Stdout, Stderr io.Writer

	streams []*stream
	// ctx ends the tunnels' retries when the worker closes them.
	ctx    context.Context
	cancel context.CancelFunc
	lns    []net.Listener
	slots  chan struct{}
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	wg     sync.WaitGroup
}

// Start takes the gateway's token out of the environment, reads the session, listens on
// every host socket at its place below root (the layout root: a mount's Dst below
// [wire.DefaultRoot] moves below root) and reads the secrets object. stdout and stderr are
// the container's own streams.
func Start(ctx context.Context, root string, stdout, stderr io.Writer) (*Worker, error) {
	c, err := FromEnv(os.Getenv(DispatchEnv))
	if err != nil {
		return nil, err
	}
	return StartClient(ctx, c, root, stdout, stderr)
}

// StartClient is [Start] with the dispatch's client made already (a warm worker's, from
// [ClaimFromEnv]).
func StartClient(ctx context.Context, c *Client, root string, stdout, stderr io.Writer) (*Worker, error) {
	c.log = stderr // the container's own: the host's streams may be what is down
	ctx, cancel := context.WithTimeout(ctx, OutageLimit+startGrace)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	w := &Worker{c: c, info: info, root: root, slots: make(chan struct{}, maxTunnels), conns: map[net.Conn]struct{}{}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			w.closeTunnels()
			c.Close()
		}
	}()
	for _, m := range info.Mounts {
		for _, s := range m.Sockets {
			if err := w.listen(m.Name, s, filepath.Join(Local(root, m.Dst), s)); err != nil {
				return nil, err
			}
		}
	}
	if info.Files > 0 {
		b, err := c.File(ctx, 0, MaxSecretsFile)
		if err != nil {
			return nil, fmt.Errorf("secrets: %w", err)
		}
		if w.SecretsFile, err = pipeOf(b); err != nil {
			return nil, fmt.Errorf("secrets: %w", err)
		}
	}
	so, se := c.openStream("stdout"), c.openStream("stderr")
	w.streams = []*stream{so, se}
	w.Stdout, w.Stderr = &tee{local: stdout, remote: so}, &tee{local: stderr, remote: se}
	ok = true
	return w, nil
}

// Local maps a mount's destination to its place below the layout root root.
func Local(root, dst string) string {
	if root == wire.DefaultRoot {
		return dst
	}
	if rel, ok := strings.CutPrefix(dst, wire.DefaultRoot+"/"); ok {
		return filepath.Join(root, rel)
	}
	return dst
}

// ExitCode is the worker's exit status for err, an error of [Start] or [Finish]:
// [remote.ExitGatewayUnreachable] when the gateway did not answer for [OutageLimit], or its
// outage lost a once-only answer ([LostError]), else 1.
func ExitCode(err error) int {
	if errors.As(err, new(*UnreachableError)) || errors.As(err, new(*LostError)) {
		return remote.ExitGatewayUnreachable
	}
	return 1
}

// Finish uploads every Result mount (the caller has written result.json and stopped every
// process of the agent), then closes the tunnels and the streams. An error means the host
// did not get the result.
func (w *Worker) Finish(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	var errs []error
	for _, m := range w.info.Mounts {
		if m.Result {
			if err := w.c.Upload(ctx, m, Local(w.root, m.Dst)); err != nil {
				errs = append(errs, fmt.Errorf("upload %s: %w", m.Dst, err))
			}
		}
	}
	w.closeTunnels()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(w.Stderr, "agora worker: error: %v\n", err)
	}
	for _, s := range w.streams {
		s.close()
	}
	w.c.Close()
	return errors.Join(errs...)
}

// DialSocket connects to the host socket called name (a socket of one of the session's
// mounts) through a tunnel, in-process: for the worker's own calls, which must not go through
// a socket file the agent could replace.
func (w *Worker) DialSocket(ctx context.Context, name string) (net.Conn, error) {
	for _, m := range w.info.Mounts {
		if slices.Contains(m.Sockets, name) {
			return w.c.DialTunnel(ctx, m.Name, name)
		}
	}
	return nil, fmt.Errorf("the session has no host socket %q", name)
}

// pipeOf returns the read end of a pipe that yields b, written by a goroutine that ends when
// b is read or the read end is closed.
func pipeOf(b []byte) (*os.File, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		wr.Write(b)
		wr.Close()
		clear(b)
	}()
	return r, nil
}
