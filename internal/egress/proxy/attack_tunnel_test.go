package proxy

import (
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// Attack (HIGH): a tunnel whose client closes while the host keeps its side open (a server
// that ignores a half-close) must still end, with its net.close entry, without waiting for
// the dispatch to end.
func TestAttack_TunnelClientCloseEndsTheTunnel(t *testing.T) {
	port, _ := rawServer(t, holdConn)
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port), linger: 200 * time.Millisecond}, nil)
	for _, half := range []bool{true, false} {
		c, _ := dialConnect(t, f.url.Host, "127.0.0.1:"+port)
		io.WriteString(c, "hello")
		if half {
			c.(*net.TCPConn).CloseWrite()
		} else {
			c.Close()
		}
	}
	if got := f.audit.waitEntries(t, entry.NetClose, 2, 5*time.Second); len(got) != 2 {
		t.Fatalf("the tunnels did not end after the client closed:\n%s", f.audit.dump())
	}
	for _, e := range f.audit.find(entry.NetClose, "") {
		if e.details["bytes_up"].(int64) != 5 {
			t.Fatalf("net.close = %v, want 5 bytes up", e.details)
		}
	}
}

// Attack (HIGH): a host that closes while the client keeps its side open ends the tunnel
// too; the client reads the end.
func TestAttack_TunnelUpstreamCloseEndsTheTunnel(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) { io.WriteString(c, "bye") })
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port), linger: 200 * time.Millisecond}, nil)
	c, br := dialConnect(t, f.url.Host, "127.0.0.1:"+port)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(br); err != nil || string(b) != "bye" {
		t.Fatalf("client read %q, %v; want the host's bytes then the end", b, err)
	}
	got := f.audit.waitEntries(t, entry.NetClose, 1, 5*time.Second)
	if len(got) != 1 || got[0].details["bytes_down"].(int64) != 3 {
		t.Fatalf("net.close after the host closed:\n%s", f.audit.dump())
	}
}

// Attack (HIGH): the dispatch ends while tunnels and a terminated session wait on silent
// hosts. Close returns promptly and every allowed connection has exactly one net.close,
// recorded although the proxy's context is done (the dispatch's writer refuses a record
// whose context is cancelled).
func TestAttack_CloseEndsBlockedConnectionsWithOneCloseEach(t *testing.T) {
	port, _ := rawServer(t, holdConn)
	arrived := make(chan struct{}, 1)
	silent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer silent.Close()
	_, sport := hostPort(t, silent.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := &ctxAudit{}
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1:"+port), Audit: a, CA: ca, Roots: poolOf(silent.Certificate()),
		Bindings: []Binding{{Key: "K", Placeholder: "agora-placeholder-0011223344556677", Value: []byte("secret-value-0123"), Hosts: []string{"127.0.0.1"}}},
	}, nil)
	f.p.cfg.Rules = append(f.p.cfg.Rules, rules(t, "127.0.0.1:"+sport)...)
	for range 2 {
		c, _ := dialConnect(t, f.url.Host, "127.0.0.1:"+port)
		io.WriteString(c, "x")
	}
	tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+sport, poolFromCA(ca))
	io.WriteString(tc, "GET /wait HTTP/1.1\r\nHost: 127.0.0.1:"+sport+"\r\n\r\n")
	a.waitEntries(t, entry.NetConnect, 3, 5*time.Second)
	awaitArrivals(t, arrived, 1) // the request reaches the silent host
	done := make(chan struct{})
	go func() { f.p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on connections whose host is silent")
	}
	if n := len(a.find(entry.NetClose, "")); n != 3 {
		t.Fatalf("net.close entries = %d, want 3:\n%s", n, a.dump())
	}
}

// awaitArrivals waits for n requests to reach the hosts (each handler sends on arrived as
// it starts).
func awaitArrivals(t *testing.T, arrived <-chan struct{}, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d requests reached their hosts", i, n)
		}
	}
}

func poolFromCA(ca *CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(ca.CertPEM())
	return p
}

// Attack (HIGH): the client goes away while its request waits on a slow host, in a
// terminated session and over plain HTTP. The connection ends at once (not after the idle
// timeout), the host's connection is closed, and net.close is written.
func TestAttack_ClientGoneWhileHostIsSlow(t *testing.T) {
	arrived := make(chan struct{}, 2)
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer slow.Close()
	slowPlain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer slowPlain.Close()
	_, port := hostPort(t, slow.URL)
	_, pport := hostPort(t, slowPlain.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1"), CA: ca, Roots: poolOf(slow.Certificate()),
		Bindings: []Binding{{Key: "K", Placeholder: "agora-placeholder-0011223344556677", Value: []byte("secret-value-0123"), Hosts: []string{"127.0.0.1"}}},
	}, nil)
	tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+port, poolFromCA(ca))
	io.WriteString(tc, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n")
	c := dialProxy(t, f.url.Host)
	io.WriteString(c, "GET http://127.0.0.1:"+pport+"/slow HTTP/1.1\r\nHost: x\r\n\r\n")
	awaitArrivals(t, arrived, 2) // both requests reach their hosts
	tc.Close()
	c.Close()
	if got := f.audit.waitEntries(t, entry.NetClose, 2, 5*time.Second); len(got) != 2 {
		t.Fatalf("connections whose client left still wait on their hosts:\n%s", f.audit.dump())
	}
}

// A connection allowed before the audit budget was spent still gets its net.close after it.
func TestAttack_CloseRecordedPastTheBudget(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port), MaxAuditEntries: 3, linger: 100 * time.Millisecond}, nil)
	c, _ := dialConnect(t, f.url.Host, "127.0.0.1:"+port)
	for range 4 {
		rawConnect(t, f.url.Host, "evil.test:443", "")
	}
	c.Close()
	if got := f.audit.waitEntries(t, entry.NetClose, 1, 5*time.Second); len(got) != 1 {
		t.Fatalf("no net.close past the budget:\n%s", f.audit.dump())
	}
}
