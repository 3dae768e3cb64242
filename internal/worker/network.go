package worker

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// maxRelayConns caps the connections the proxy relay carries at once; more are closed. The
// host's proxy has its own cap; this one bounds the worker's goroutines and descriptors.
const maxRelayConns = 1024

// proxyRelay listens on the sandbox's loopback and carries each connection, byte for byte, to
// the host's egress proxy on its Unix socket. It reads nothing: every decision is the host's.
// Inside the sandbox the loopback is the sandbox's own network namespace, reachable only by
// the agent's processes; without a sandbox the host's proxy wants a token as well.
type proxyRelay struct {
	ln     net.Listener
	socket string
	token  string
	slots  chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// network starts the relay when the host runs a proxy for this dispatch (phase network).
func (r *runner) network(ctx context.Context) *failure {
	token := os.Getenv(wire.ProxyTokenEnv)
	os.Unsetenv(wire.ProxyTokenEnv)
	if r.man.Network != wire.NetworkProxy {
		return nil
	}
	socket, err := socketPath(r.opts.Root, wire.ProxySocket)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "network: egress proxy: %v", err)
	}
	pr, err := startProxyRelay(socket, token)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "network: egress proxy relay: %v", err)
	}
	r.proxy = pr
	return nil
}

func startProxyRelay(socket, token string) (*proxyRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	pr := &proxyRelay{ln: ln, socket: socket, token: token, slots: make(chan struct{}, maxRelayConns), conns: map[net.Conn]struct{}{}}
	pr.wg.Go(pr.serve)
	return pr, nil
}

// URL is the proxy URL the agent's tools use.
func (pr *proxyRelay) URL() string {
	u := url.URL{Scheme: "http", Host: pr.ln.Addr().String()}
	if pr.token != "" {
		u.User = url.UserPassword("agora", pr.token)
	}
	return u.String()
}

func (pr *proxyRelay) serve() {
	for {
		c, err := pr.ln.Accept()
		if err != nil {
			return
		}
		select {
		case pr.slots <- struct{}{}:
		default:
			c.Close() // too many at once: the client sees a reset and may retry
			continue
		}
		pr.track(c, true)
		pr.wg.Go(func() {
			defer func() { <-pr.slots }()
			defer pr.track(c, false)
			pr.carry(c)
		})
	}
}

func (pr *proxyRelay) track(c net.Conn, add bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if add {
		pr.conns[c] = struct{}{}
		return
	}
	delete(pr.conns, c)
	c.Close()
}

// carry copies both ways until both directions end, passing half-closes on.
func (pr *proxyRelay) carry(c net.Conn) {
	u, err := net.Dial("unix", pr.socket)
	if err != nil {
		return
	}
	defer u.Close()
	pr.mu.Lock()
	pr.conns[u] = struct{}{}
	pr.mu.Unlock()
	defer func() { pr.mu.Lock(); delete(pr.conns, u); pr.mu.Unlock() }()
	done := make(chan struct{})
	go func() {
		copyAndHalfClose(u, c)
		close(done)
	}()
	copyAndHalfClose(c, u)
	<-done
}

func copyAndHalfClose(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
}

// close stops the relay and ends every connection it carries.
func (pr *proxyRelay) close() {
	if pr == nil {
		return
	}
	pr.ln.Close()
	pr.mu.Lock()
	for c := range pr.conns {
		c.Close()
	}
	pr.mu.Unlock()
	pr.wg.Wait()
}

// proxyEnv is what the agent's environment gains when it has the proxy: the proxy variables
// (both cases: curl reads only http_proxy in lower case, others only upper), loopback kept
// direct, and the trust store's bundle for every tool that reads its own variable.
func proxyEnv(proxyURL, root string) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env[k] = proxyURL
		env[lower(k)] = proxyURL
	}
	env["NO_PROXY"] = "localhost,127.0.0.1,::1"
	env["no_proxy"] = env["NO_PROXY"]
	trust := filepath.Join(root, wire.TrustDir, wire.TrustFile)
	if fi, err := os.Stat(trust); err == nil && fi.Mode().IsRegular() {
		for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT"} {
			env[k] = trust
		}
	}
	return env
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
