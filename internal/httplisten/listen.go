// Package httplisten opens the TCP listener of agora's HTTP servers (MCP HTTP, the web run
// view): "localhost" is bound as 127.0.0.1, never whatever a resolver says, and open
// connections are capped, so connections that never authenticate cannot pile up past a
// bound (each is also cut off by the server's read-header timeout). The bind rules (token,
// loopback unless opted in) are checked before, by mcpserver.CheckHTTP. It imports only the
// standard library: mcpserver's import closure is pinned.
package httplisten

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Listen listens on addr (HOST:PORT) and accepts at most maxConns connections open at once.
// With the cap reached, an idle keep-alive connection (one that [ConnState] was told is idle)
// is closed to make room, oldest first; otherwise the next Accept waits for one to close. So
// whoever reaches the port cannot keep everyone else out by holding connections idle, for
// which no token is needed; a connection in the middle of a request is cut off by the
// server's own timeouts instead.
func Listen(addr string, maxConns int) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, maxConns), idle: map[*limitConn]time.Time{}}, nil
}

// ConnState is the http.Server ConnState hook for a listener from [Listen]: it tells the
// listener which connections are idle. It does nothing for any other connection.
func ConnState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l := lc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
}

// retryFull is how often a full listener looks again for an idle connection to close.
const retryFull = 50 * time.Millisecond

type limitListener struct {
	net.Listener
	sem chan struct{}

	mu sync.Mutex
	// idle are the connections idle between requests, since when; guarded by mu.
	idle map[*limitConn]time.Time
}

func (l *limitListener) Accept() (net.Conn, error) {
	for taken := false; !taken; {
		select {
		case l.sem <- struct{}{}:
			taken = true
			continue
		default:
		}
		if l.closeOldestIdle() {
			continue
		}
		t := time.NewTimer(retryFull)
		select {
		case l.sem <- struct{}{}:
			taken = true
		case <-t.C:
		}
		t.Stop()
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l}
	lc.release = func() { <-l.sem }
	return lc, nil
}

// closeOldestIdle closes the connection idle longest; false when none is idle.
func (l *limitListener) closeOldestIdle() bool {
	l.mu.Lock()
	var oldest *limitConn
	var at time.Time
	for c, since := range l.idle {
		if oldest == nil || since.Before(at) {
			oldest, at = c, since
		}
	}
	if oldest != nil {
		delete(l.idle, oldest)
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

type limitConn struct {
	net.Conn
	l       *limitListener
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		c.release()
	})
	return err
}
