package netgw

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestServe_SameSourceAttackerDoesNotStarveAPod: pods
// behind one NAT address share a source, so an agent that fills its source's pending pool with
// idle connections used to get every other pod of its node refused. A full pool now closes
// its oldest pending connection, so the attacker's idle connections are what goes, and the
// dispatch from the SAME address gets its request and its tunnel through.
func TestServe_SameSourceAttackerDoesNotStarveAPod(t *testing.T) {
	const perSource = 8
	g := startGatewayWith(t, workerVersion(), func(s *Server) {
		s.MaxPendingPerSource = perSource
		s.PreAuthTimeout = 30 * time.Second // far longer than the test: only eviction frees a slot
	})
	l := stageLayout(t, "01NATPOD")
	s := g.export(t, l)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	var hostile []net.Conn
	for i := range perSource {
		raw := g.dialFrom(t, "127.0.0.1") // the dispatch's own client dials from 127.0.0.1 too
		if i%2 == 1 {                     // half of them finish TLS and then say nothing
			tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
			if err := tc.Handshake(); err != nil {
				t.Fatalf("hostile handshake: %v", err)
			}
			raw = tc
		}
		hostile = append(hostile, raw)
	}
	agoratest.WaitFor(t, 30*time.Second, "the source's pool full", func() bool {
		g.srv.conns.mu.Lock()
		defer g.srv.conns.mu.Unlock()
		l := g.srv.conns.bySource["127.0.0.1"]
		return l != nil && l.Len() == perSource
	})

	c := g.client(t, l.id, s.Token)
	if _, err := c.Info(t.Context()); err != nil {
		t.Fatalf("a dispatch's request from the attacker's address: %v", err)
	}
	conn, err := c.DialTunnel(t.Context(), "gateway", "echo.sock")
	if err != nil {
		t.Fatalf("a dispatch's tunnel from the attacker's address: %v", err)
	}
	io.WriteString(conn, "ok")
	buf := make([]byte, 2)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ok" {
		t.Errorf("echo through the tunnel: %q %v", buf, err)
	}
	conn.Close()
	// The oldest hostile connections made room: at least the first one is closed.
	if err := closedByPeer(hostile[0]); err != nil {
		t.Errorf("the oldest idle connection was not closed: %v", err)
	}
	if !strings.Contains(g.logs.String(), "closed its oldest") {
		t.Errorf("the log does not say a pending connection was evicted:\n%s", g.logs.String())
	}
	assertNoToken(t, g, s.Token)
}
