package proxy

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer accepts on 127.0.0.1 and hands each connection to h; it returns the port and
// how many connections it accepted so far. When the test ends it stops accepting, closes
// every connection it accepted and waits for their handlers: nothing it started outlives
// the test (goleak in TestMain checks).
func rawServer(t *testing.T, h func(net.Conn)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	ended := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn // guarded by mu
	var handlers sync.WaitGroup
	t.Cleanup(func() {
		close(ended)
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		handlers.Wait()
	})
	handlers.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			handlers.Go(func() {
				defer c.Close()
				h(serverConn{Conn: c, ended: ended})
			})
		}
	})
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), &n
}

// serverConn is a connection rawServer accepted; ended is closed when the test ends.
type serverConn struct {
	net.Conn
	ended <-chan struct{}
}

// holdConn reads and discards until the peer closes the whole connection or the test ends,
// never closing on its own (a server that ignores a half-close). It held on for a minute
// before, whatever the test did, and each such handler outlived its test.
func holdConn(c net.Conn) {
	io.Copy(io.Discard, c)
	<-c.(serverConn).ended
}

// dialConnect opens a connection to the proxy and sends CONNECT target; it fails the test
// unless the answer is 200.
func dialConnect(t *testing.T, proxyAddr, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("CONNECT %s: %d %s", target, resp.StatusCode, b)
	}
	c.SetReadDeadline(time.Time{})
	return c, br
}

// waitEntries waits up to d for n entries of kind and returns them.
func (a *memAudit) waitEntries(t *testing.T, kind string, n int, d time.Duration) []recorded {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := a.find(kind, "")
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ctxAudit fails a record whose context is done, as the dispatch's group-commit writer does.
type ctxAudit struct{ memAudit }

func (a *ctxAudit) Record(ctx context.Context, kind string, d map[string]any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return a.memAudit.Record(ctx, kind, d)
}

// rawExchange writes raw to the proxy over a fresh connection and returns the first response
// and its body.
func rawExchange(t *testing.T, proxyAddr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%.60q: %v", raw, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// tlsThrough opens a CONNECT to target and a TLS client session trusting roots over it.
func tlsThrough(t *testing.T, proxyAddr, target string, roots *x509.CertPool) net.Conn {
	t.Helper()
	c, br := dialConnect(t, proxyAddr, target)
	host, _, _ := net.SplitHostPort(target)
	tc := tlsClient(&prefixConn{Conn: c, r: br}, host, roots)
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// sendOn writes raw on c and reads one response.
func sendOn(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%.60q: %v", raw, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// dialProxy opens a plain connection to the proxy.
func dialProxy(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}
