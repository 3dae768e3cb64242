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
	"sync"
)

// Listen listens on addr (HOST:PORT) and accepts at most maxConns connections open at once;
// the next Accept waits for one to close.
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
	return &limitListener{Listener: ln, sem: make(chan struct{}, maxConns)}, nil
}

type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
