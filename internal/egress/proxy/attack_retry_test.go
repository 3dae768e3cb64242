package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Attack: make the proxy send a request twice. A host reads a request and closes without an
// answer: the client gets one 502, the host saw the request once, and it is never resent on
// a new connection (a non-idempotent request must not run twice).
func TestAttack_NoAutomaticRetry(t *testing.T) {
	var seen atomic.Int64
	port, conns := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/drop" {
				seen.Add(1)
				return // read, then close without an answer
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port)}, nil)
	c := dialProxy(t, f.url.Host)
	br := bufio.NewReader(c)
	base := "http://127.0.0.1:" + port
	if resp, _ := sendOn(t, c, br, "GET "+base+"/first HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	resp, body := sendOn(t, c, br, "GET "+base+"/drop HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 502 || !strings.Contains(body, "no valid response") {
		t.Fatalf("dropped request = %d %q, want 502", resp.StatusCode, body)
	}
	time.Sleep(100 * time.Millisecond) // a resend, if any, would have arrived
	if n := seen.Load(); n != 1 {
		t.Fatalf("the host saw the request %d times, want once", n)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the proxy opened %d connections to the host, want 1", n)
	}
}

// A kept-alive upstream connection that the host closed while idle is noticed before a
// request is written to it: the next request goes on a fresh connection, once, and
// succeeds (no resend is needed because nothing was sent on the dead one).
func TestAttack_StaleUpstreamNoticedBeforeSending(t *testing.T) {
	var seen atomic.Int64
	port, conns := rawServer(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		seen.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") // keep-alive, then close
	})
	f := start(t, Config{Rules: rules(t, "127.0.0.1:"+port)}, nil)
	c := dialProxy(t, f.url.Host)
	br := bufio.NewReader(c)
	base := "http://127.0.0.1:" + port
	for i := range 3 {
		resp, body := sendOn(t, c, br, "GET "+base+"/ HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d = %d %q", i, resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond) // the host's close arrives
	}
	if seen.Load() != 3 || conns.Load() != 3 {
		t.Fatalf("host saw %d requests on %d connections, want 3 on 3", seen.Load(), conns.Load())
	}
}
