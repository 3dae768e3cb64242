package selftest

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// listener is a TCP listener on the host's loopback that remembers what it was sent: an
// attack that reaches it proves the boundary it crossed did not hold.
type listener struct {
	l    net.Listener
	mu   sync.Mutex
	got  [][]byte
	done chan struct{}
}

func listen() (*listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ln := &listener{l: l, done: make(chan struct{})}
	go ln.serve()
	return ln, nil
}

func (ln *listener) serve() {
	defer close(ln.done)
	for {
		c, err := ln.l.Accept()
		if err != nil {
			return
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 1024)
		n, _ := c.Read(buf)
		b := append([]byte("(a connection) "), buf[:n]...)
		c.Close()
		ln.mu.Lock()
		ln.got = append(ln.got, b)
		ln.mu.Unlock()
	}
}

func (ln *listener) port() int { return ln.l.Addr().(*net.TCPAddr).Port }

func (ln *listener) reset() {
	ln.mu.Lock()
	ln.got = nil
	ln.mu.Unlock()
}

// saw reports whether any connection arrived since the last reset, and whether one
// carried the nonce. A connection alone crossed the boundary, so either counts.
func (ln *listener) saw(nonce string) (any, withNonce bool) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for _, b := range ln.got {
		withNonce = withNonce || bytes.Contains(b, []byte(nonce))
	}
	return len(ln.got) > 0, withNonce
}

func (ln *listener) close() {
	if ln == nil {
		return
	}
	ln.l.Close()
	<-ln.done
}
