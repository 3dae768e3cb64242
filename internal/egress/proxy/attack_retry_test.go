package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// Attack: make the proxy send a request twice. A host reads a request and closes without an
// answer: the client gets one 502, the host saw the request once, and it is never resent on
// a new connection (a non-idempotent request must not run twice). The connection's net.close
// is the signal: the proxy records it once it is done with the connection, so a resend of the
// dropped request would have reached the host before it.
func TestAttack_NoAutomaticRetry(t *testing.T) {
	var mu sync.Mutex
	var seen []string // the paths the host read, in order; guarded by mu
	port, conns := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, req.URL.Path)
			mu.Unlock()
			if req.URL.Path == "/drop" {
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
	if got := f.audit.waitEntries(t, entry.NetClose, 1, 30*time.Second); len(got) != 1 {
		t.Fatalf("the connection's net.close: %d entries:\n%s", len(got), f.audit.dump())
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, " "); got != "/first /drop" {
		t.Fatalf("the host read %s, want /first /drop: the dropped request was sent again", got)
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
