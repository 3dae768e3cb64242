package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Attack: oversized heads. The sandbox sends an endless header inside a terminated TLS
// connection; a host answers with an endless response head. Each gets a clear error after a
// bounded read, never an unbounded buffer.
func TestAttack_OversizedHeadInTerminatedSession(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1:"+port), CA: ca, Roots: poolOf(srv.Certificate()),
		Bindings: []Binding{{Key: "K", Placeholder: "agora-placeholder-0011223344556677", Value: []byte("secret-value-0123"), Hosts: []string{"127.0.0.1:" + port}}},
	}, nil)
	tc := tlsThrough(t, f.url.Host, "127.0.0.1:"+port, poolFromCA(ca))
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\nX-Big: ")
		chunk := strings.Repeat("a", 64<<10)
		for range 64 { // 4 MiB, far past any head cap
			if _, err := io.WriteString(tc, chunk); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("no answer to an endless header: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 431 || !strings.Contains(string(body), "too large") {
		t.Fatalf("endless header = %d %q, want 431 saying the head is too large", resp.StatusCode, body)
	}
}

func TestAttack_OversizedResponseHeadFromHost(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ")
		chunk := strings.Repeat("a", 64<<10)
		for range 128 { // 8 MiB
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
	})
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port)}, nil)
	resp, body := rawExchange(t, f.url.Host, fmt.Sprintf("GET http://127.0.0.1:%s/ HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n", port, port))
	if resp.StatusCode != 502 || !strings.Contains(body, "too large") {
		t.Fatalf("endless response head = %d %q, want 502 saying it is too large", resp.StatusCode, body)
	}
}
