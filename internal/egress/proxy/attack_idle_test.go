package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// Attack: one sandbox opens connections and leaves them silent to pin the host's resources.
// A tunnel, a terminated session waiting on a silent host, and a plain connection waiting
// for its next request all end after the idle timeout, each with its net.close.
func TestAttack_IdleConnectionsTimeOut(t *testing.T) {
	port, _ := rawServer(t, holdConn)
	silent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer silent.Close()
	_, sport := hostPort(t, silent.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	plainSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plainSrv.Close()
	_, pport := hostPort(t, plainSrv.URL)
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1:"+port, "example.com:"+sport, "127.0.0.1:"+pport), CA: ca, Roots: poolOf(silent.Certificate()),
		IdleTimeout: 300 * time.Millisecond,
		Bindings:    []Binding{{Key: "K", Placeholder: "agora-placeholder-0011223344556677", Value: []byte("secret-value-0123"), Hosts: []string{"example.com"}}},
	}, resolver{"example.com": "127.0.0.1"})
	dialConnect(t, f.url.Host, "127.0.0.1:"+port) // a silent tunnel
	tc := tlsThrough(t, f.url.Host, "example.com:"+sport, poolFromCA(ca))
	io.WriteString(tc, "GET /wait HTTP/1.1\r\nHost: example.com:"+sport+"\r\n\r\n") // a host that never answers
	c := dialProxy(t, f.url.Host)                                                   // a plain connection kept after its answer
	if resp, _ := sendOn(t, c, bufioReader(c), "GET http://127.0.0.1:"+pport+"/ HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("plain: %d", resp.StatusCode)
	}
	if got := f.audit.waitEntries(t, entry.NetClose, 3, 5*time.Second); len(got) != 3 {
		t.Fatalf("silent connections outlived the idle timeout:\n%s", f.audit.dump())
	}
}

// A tunnel that moves bytes (one direction only: a download) is not idle: it outlives the
// idle timeout by half again, never silent for a twentieth of it. The proxy's idle limit is a
// real network deadline, which no fake clock reaches; the wide margin keeps a loaded
// machine's late goroutine from looking like a silent host.
func TestAttack_IdleTimeoutSparesActiveTunnels(t *testing.T) {
	const idle, bytes = time.Second, 30
	port, _ := rawServer(t, func(c net.Conn) {
		for i := range bytes {
			fmt.Fprintf(c, "%c", 'a'+i%26)
			time.Sleep(idle / 20)
		}
	})
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port), IdleTimeout: idle}, nil)
	c, br := dialConnect(t, f.url.Host, "127.0.0.1:"+port)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	b, _ := io.ReadAll(br)
	if len(b) != bytes {
		t.Fatalf("an active download was cut after %d of %d bytes: %q", len(b), bytes, b)
	}
	if took := time.Since(start); took < idle {
		t.Fatalf("the download took %s, less than the idle timeout: it proves nothing", took)
	}
}

// The connection limit holds: with MaxConns 2 and two silent tunnels, a third client is
// served only once the idle timeout has ended one of them.
func TestAttack_MaxConnsHoldsWithIdleTunnels(t *testing.T) {
	port, _ := rawServer(t, holdConn)
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port), MaxConns: 2, IdleTimeout: time.Second}, nil)
	dialConnect(t, f.url.Host, "127.0.0.1:"+port)
	dialConnect(t, f.url.Host, "127.0.0.1:"+port)
	c := dialProxy(t, f.url.Host)
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%s HTTP/1.1\r\n\r\n", port)
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	br := bufio.NewReader(c)
	if _, err := br.Peek(1); err == nil {
		t.Fatal("a third connection was served while two were open under MaxConns 2")
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the third connection was never served after the idle ones ended: %v", err)
	}
}
