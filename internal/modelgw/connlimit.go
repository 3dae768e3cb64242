package modelgw

import (
	"net"
	"sync"
)

// maxConns caps the connections the gateway holds open at once. Every connection costs the
// supervisor, on the host and outside the sandbox's memory limit, a goroutine and its
// buffers (about 18 KiB idle): 3,000 idle keep-alive connections once held 55 MiB. The
// request limits (rate, requests in flight, the audit budget) count requests, and a
// connection that sent one refused request costs no entry, so only a cap on connections
// bounds this. 64 is four times [DefaultMaxConcurrent]: the worker's clients keep at most
// four idle connections, claude-code's hooks open one per report and close it, and claude's
// model requests share the worker's relay, so a dispatch uses a handful; 64 leaves room for
// parallel tool calls and streams while holding the supervisor to about 1 MiB per dispatch.
//
// Past the cap the gateway stops accepting: a new connection waits in the socket's listen
// queue (its kernel memory is the connecting process's, so the sandbox's) until one closes,
// which an idle one does after idleTimeout. A sandbox that fills the cap only slows itself.
const maxConns = 64

// limitListener accepts at most cap(slots) connections at a time: Accept waits for a slot
// before it takes a connection off the listen queue, and a connection gives its slot back
// when it is closed.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{} // closed by Close, which ends a waiting Accept
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and ends an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, on the first Close.
type limitConn struct {
	net.Conn
	releaseOnce sync.Once
	release     func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(c.release)
	return err
}

// CloseWrite lets net/http half-close the connection before it closes it after an error
// answer (as it does for the bare *net.UnixConn), so the client reads the answer instead of
// a reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
