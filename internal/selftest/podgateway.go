package selftest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Gateway is the network gateway a kubernetes target's pods reach the throw-away home at:
// `agora gateway serve` in that home for the run, beside the person's own gateway (whose
// sessions are its home's), on a port of its own.
type Gateway struct {
	// Listen is the address it listens on, HOST:PORT.
	Listen string
	// Advertise is the URL the pods reach it at, https://HOST:PORT; the throw-away
	// agora.yaml names it as the target's gateway ([ConfigWithGateway]).
	Advertise string
	// ln holds Listen's port from PodGateway until the gateway's process takes it over
	// (serveGateway): the port is never free in between for another process to take.
	ln *net.TCPListener
}

// Close releases the port when no gateway took it over; it is safe to call again.
func (g *Gateway) Close() {
	if g != nil && g.ln != nil {
		g.ln.Close()
	}
}

// listenFDEnv names the descriptor `agora gateway serve` takes its listening socket from
// (internal/cli's ListenFDEnv, which selftest does not import: it drives the agora program).
const listenFDEnv = "AGORA_GATEWAY_LISTEN_FD"

// PodGateway picks the throw-away home's gateway from the person's: the host of advertise
// (the target's gateway, else gateway.advertise) and of listen (gateway.listen; "" listens
// on the advertised host), with a port of its own on the listening host, held until the
// gateway serves on it (or [Gateway.Close]). The pods' network policy admits that address and
// port alone, as it admits the person's.
func PodGateway(listen, advertise string) (*Gateway, error) {
	u, err := url.Parse(advertise)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("the gateway URL %q: want https://HOST:PORT (gateway.advertise, or the target's gateway:)", advertise)
	}
	host := u.Hostname()
	if listen != "" {
		if host, _, err = net.SplitHostPort(listen); err != nil {
			return nil, fmt.Errorf("gateway.listen %q: %w", listen, err)
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("find a free port for the selftest's gateway on %s: %w", host, err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	return &Gateway{Listen: net.JoinHostPort(host, port), Advertise: "https://" + net.JoinHostPort(u.Hostname(), port),
		ln: l.(*net.TCPListener)}, nil
}

// gatewayStart bounds how long `agora gateway serve` may take to say it serves.
const gatewayStart = 30 * time.Second

// serveGateway starts `agora gateway serve` in the throw-away home on g's socket, handed
// over as descriptor 3, and returns once it serves; stop ends it.
func (r *run) serveGateway(ctx context.Context, g *Gateway) (stop func(), err error) {
	if g.ln == nil {
		return nil, fmt.Errorf("the selftest's gateway on %s: its port is no longer held", g.Listen)
	}
	sock, err := g.ln.File()
	if err != nil {
		return nil, fmt.Errorf("hand the selftest's gateway its socket: %w", err)
	}
	defer sock.Close() // the child's copy is its own once started
	cmd := exec.CommandContext(ctx, r.o.Agora, "gateway", "serve", "--listen", g.Listen, "--advertise", g.Advertise)
	cmd.Env, cmd.Dir = append(slices.Clip(r.env), listenFDEnv+"=3"), r.work
	cmd.ExtraFiles = []*os.File{sock} // descriptor 3
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the selftest's gateway: %w", err)
	}
	g.Close() // the gateway holds the port now
	serving := make(chan error, 1)
	var said strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		ok := false
		for sc.Scan() {
			if !ok && strings.HasPrefix(sc.Text(), "agora: gateway serving on ") {
				ok = true
				serving <- nil
			}
			if !ok && said.Len() < 4096 {
				said.WriteString(sc.Text() + "\n")
			}
		}
		if !ok {
			serving <- errors.New(strings.TrimSpace(said.String()))
		}
	}()
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	select {
	case err = <-serving:
	case <-time.After(gatewayStart):
		err = fmt.Errorf("it did not serve within %s", gatewayStart)
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("agora gateway serve --listen %s in the throw-away home: %w", g.Listen, err)
	}
	return stop, nil
}
