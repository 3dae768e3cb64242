package netgw

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// dialFrom opens a TCP connection to the gateway from the loopback address src (Linux
// routes all of 127/8 to lo), so a test can be several sources at once.
func (g *gw) dialFrom(t testing.TB, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(g.url, "https://"))
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer waits (up to a generous bound, not a timing assertion) for c to be closed by
// the gateway: a read that ends in EOF or a reset, never in our own deadline.
func closedByPeer(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errors.New("still open after 30 s")
		}
		return nil
	}
}

// TestServe_IdleConnectionsDoNotStarveOthers: a peer without a
// token holds as many idle TCP connections as it can, and another trickles a request header
// (slowloris). A dispatch's worker connecting from another address is still served, and
// every hostile connection is closed by the gateway, refused at accept or timed out before a
// token; the refusals are logged, without a token.
func TestServe_IdleConnectionsDoNotStarveOthers(t *testing.T) {
	const perSource = 8
	g := startGatewayWith(t, workerVersion(), func(s *Server) {
		s.MaxPendingPerSource = perSource
		s.PreAuthTimeout = 2 * time.Second
	})
	l := stageLayout(t, "01STARVE")
	s := g.export(t, l)

	var hostile []net.Conn
	// Idle: TCP only, never a byte; three times what the source may hold.
	for range 3 * perSource {
		hostile = append(hostile, g.dialFrom(t, "127.0.0.2"))
	}
	// Slowloris: a TLS handshake, then a header a few bytes at a time.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	var trickle sync.WaitGroup
	for range perSource {
		raw := g.dialFrom(t, "127.0.0.3")
		tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		hostile = append(hostile, tc)
		trickle.Go(func() {
			if _, err := io.WriteString(tc, "GET /v1/dispatches/01STARVE/session HTTP/1.1\r\nHost: x\r\n"); err != nil {
				return
			}
			for i := 0; i < 300; i++ {
				if _, err := io.WriteString(tc, "X: y\r\n"); err != nil {
					return
				}
				// The slowloris's pace is the attack (a header trickled in under the
				// gateway's limits, never finished), and the pre-auth deadline it must meet is
				// the gateway's real-time one: only a clock can pace it.
				time.Sleep(100 * time.Millisecond)
			}
		})
	}

	// The legitimate dispatch, from 127.0.0.1, while the hostile connections are held.
	c := g.client(t, l.id, s.Token)
	if _, err := c.Info(t.Context()); err != nil {
		t.Fatalf("a dispatch's request during the attack: %v", err)
	}
	conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
	if err != nil {
		t.Fatalf("a dispatch's tunnel during the attack: %v", err)
	}
	io.WriteString(conn, "ok")
	buf := make([]byte, 2)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ok" {
		t.Errorf("echo through a tunnel during the attack: %q %v", buf, err)
	}
	conn.Close()

	for i, hc := range hostile {
		if err := closedByPeer(hc); err != nil {
			t.Errorf("hostile connection %d: %v", i, err)
		}
	}
	trickle.Wait()
	logs := g.logs.String()
	for _, want := range []string{"gateway connection refused", "too many unauthenticated connections from this source", "no valid request in time", "127.0.0.2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	assertNoToken(t, g, s.Token)
	agoratest.WaitFor(t, 30*time.Second, "no pending connection left", func() bool {
		g.srv.conns.mu.Lock()
		defer g.srv.conns.mu.Unlock()
		return g.srv.conns.order.Len() == 0 && len(g.srv.conns.bySource) == 0
	})
}

// TestServe_RefusedRequestClosesConnection: an unauthenticated peer gets one request per
// connection; it cannot park a refused connection in keep-alive.
func TestServe_RefusedRequestClosesConnection(t *testing.T) {
	g := startGateway(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	tc := tls.Client(g.dialFrom(t, "127.0.0.4"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	io.WriteString(tc, "GET /v1/dispatches/01NOSUCH/session HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer agw_x\r\n\r\n")
	if err := closedByPeer(tc); err != nil {
		t.Error(err)
	}
}

// TestServe_ConnsPerDispatch: one dispatch (an agent opening tunnels through its worker)
// holds at most MaxConnsPerDispatch connections; another dispatch is still served.
func TestServe_ConnsPerDispatch(t *testing.T) {
	const perDispatch = 3
	g := startGatewayWith(t, workerVersion(), func(s *Server) { s.MaxConnsPerDispatch = perDispatch })
	a, b := stageLayout(t, "01GREEDY"), stageLayout(t, "01OTHER")
	sa, sb := g.export(t, a), g.export(t, b)
	ca := g.client(t, a.id, sa.Token)
	var tunnels []net.Conn
	for range perDispatch {
		conn, err := ca.DialTunnel(t.Context(), "gateway", "echo.sock")
		if err != nil {
			t.Fatal(err)
		}
		tunnels = append(tunnels, conn)
	}
	_, err := ca.DialTunnel(t.Context(), "gateway", "echo.sock")
	var se *workerremote.StatusError
	if !errors.As(err, &se) || se.Code != 429 {
		t.Fatalf("a tunnel over the dispatch's cap: %v, want 429", err)
	}
	if _, err := g.client(t, b.id, sb.Token).Info(t.Context()); err != nil {
		t.Errorf("another dispatch while the first is at its cap: %v", err)
	}
	tunnels[0].Close()
	agoratest.WaitFor(t, 30*time.Second, "a slot freed by a closed tunnel", func() bool {
		conn, err := ca.DialTunnel(t.Context(), "gateway", "echo.sock")
		if err != nil {
			return false
		}
		tunnels = append(tunnels, conn)
		return true
	})
	for _, c := range tunnels {
		c.Close()
	}
	if !strings.Contains(g.logs.String(), "too many connections for this dispatch") {
		t.Errorf("the refusal is not logged:\n%s", g.logs.String())
	}
	assertNoToken(t, g, sa.Token, sb.Token)
}

// TestTunnel_IdleTimeout: a tunnel carrying bytes stays open past the idle timeout; one that
// carries none either way is closed at both ends.
func TestTunnel_IdleTimeout(t *testing.T) {
	const idle = 1500 * time.Millisecond
	g := startGatewayWith(t, workerVersion(), func(s *Server) { s.TunnelIdleTimeout = idle })
	l := stageLayout(t, "01TUNNELIDLE")
	s := g.export(t, l)
	conn, err := g.client(t, l.id, s.Token).DialTunnel(t.Context(), "gateway", "echo.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 1)
	for start := time.Now(); time.Since(start) < 2*idle; {
		if _, err := io.WriteString(conn, "x"); err != nil {
			t.Fatalf("an active tunnel was closed: %v", err)
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			t.Fatalf("an active tunnel was closed: %v", err)
		}
		time.Sleep(idle / 5)
	}
	if err := closedByPeer(conn); err != nil {
		t.Errorf("an idle tunnel: %v", err)
	}
	agoratest.WaitFor(t, 30*time.Second, "the tunnel released", func() bool { return g.tunnelsOf(l.id) == 0 })
	if !strings.Contains(g.logs.String(), `"reason":"idle"`) {
		t.Errorf("the idle close is not logged:\n%s", g.logs.String())
	}
}

// TestTunnel_RevokeClosesHostSide: the host's socket server
// accepts a tunnel's connection and then neither reads, writes nor closes (an idle egress
// upstream). Revoking the session closes the host side too: the gateway lets go of the
// tunnel, and the host's connection is closed, not only half-closed.
func TestTunnel_RevokeClosesHostSide(t *testing.T) {
	g := startGateway(t)
	l := stageLayout(t, "01REVOKEHOST")
	ln, err := listenUnix(filepath.Join(l.gateway, "hold.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	s := g.export(t, l)
	tunnel, err := g.client(t, l.id, s.Token).DialTunnel(t.Context(), "gateway", "hold.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer tunnel.Close()
	var host net.Conn
	select {
	case host = <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the host socket saw no connection")
	}
	defer host.Close()
	must(t, s.Close())
	if err := closedByPeer(host); err != nil {
		t.Fatalf("host side after revoke: %v", err)
	}
	// The gateway let go of its end, without the host doing anything.
	agoratest.WaitFor(t, 30*time.Second, "the revoked tunnel released", func() bool { return g.tunnelsOf(l.id) == 0 })
	// Fully closed: a write from the host fails (a half close would take it).
	host.SetWriteDeadline(time.Now().Add(30 * time.Second))
	var werr error
	for range 100 {
		if _, werr = host.Write([]byte("late")); werr != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		t.Errorf("a host write after revoke: %v, want a broken pipe (the gateway closed its end)", werr)
	}
}

// tunnelsOf is how many tunnels dispatch id holds.
func (g *gw) tunnelsOf(id string) int {
	g.srv.tunnels.mu.Lock()
	defer g.srv.tunnels.mu.Unlock()
	return g.srv.tunnels.count[id]
}

// TestServe_ReserveOutlastsAFullPool: dispatches
// whose agents open every tunnel they may filled the server (16 dispatches of 256 tunnels
// were all of MaxConns), and a dispatch starting then got nothing, not even its session. Now
// each dispatch has a reserve the others cannot take: with the shared pool full, a late
// dispatch still reads its session and opens tunnels.
func TestServe_ReserveOutlastsAFullPool(t *testing.T) {
	const pool = 8
	g := startGatewayWith(t, workerVersion(), func(s *Server) { s.MaxConns = pool; s.MaxConnsPerDispatch = 64 })
	var tunnels []net.Conn
	defer func() {
		for _, c := range tunnels {
			c.Close()
		}
	}()
	for _, id := range []string{"01GREEDYA", "01GREEDYB"} {
		l := stageLayout(t, id)
		c := g.client(t, l.id, g.export(t, l).Token)
		for {
			conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
			var se *workerremote.StatusError
			if errors.As(err, &se) && se.Code == 429 {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			tunnels = append(tunnels, conn)
		}
	}
	t.Logf("two greedy dispatches hold %d tunnels", len(tunnels))
	late := stageLayout(t, "01LATEDISPATCH")
	s := g.export(t, late)
	if code, body := g.do(t, "GET", remote.RoutePrefix+late.id+"/session", s.Token, nil); code != 200 {
		t.Fatalf("a dispatch's session with the pool full: %d %s, want 200", code, body)
	}
	c := g.client(t, late.id, s.Token)
	for i := range 4 {
		conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
		if err != nil {
			t.Fatalf("tunnel %d of a dispatch with the pool full: %v", i+1, err)
		}
		tunnels = append(tunnels, conn)
	}
	assertNoToken(t, g, s.Token)
}
