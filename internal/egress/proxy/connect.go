package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// connect serves a CONNECT: decide, dial, record, then tunnel or terminate.
func (p *Proxy) connect(cl *client, req *http.Request) {
	c, br := cl.Conn, cl.br
	t, err := parseAuthority(req.RequestURI, 0)
	if err != nil {
		p.writeStatus(c, http.StatusBadRequest, "agora egress proxy: CONNECT wants host:port ("+err.Error()+").")
		return
	}
	d := p.decide(t, true)
	if !d.allowed {
		p.refuse(c, t, "connect", d.reason)
		return
	}
	up, refused, err := p.dial(p.ctx, t)
	if refused != "" {
		p.refuse(c, t, "connect", refused)
		return
	}
	if err != nil {
		p.record(p.ctx, entry.NetConnect, connectEntry(t, "connect", "error", "connect failed: "+p.shortError(err), d.intercept))
		p.writeStatus(c, http.StatusBadGateway, "agora egress proxy: could not connect to "+t.String()+": "+p.shortError(err)+".")
		return
	}
	defer up.Close()
	// Recorded before a byte of the client reaches the host.
	if d.learn {
		if err := p.wouldDeny(t, "connect", "", "", d.reason); err != nil {
			p.writeStatus(c, http.StatusServiceUnavailable, "agora egress proxy: the connection could not be audited, so it was not made.")
			return
		}
	}
	if err := p.record(p.ctx, entry.NetConnect, connectEntry(t, "connect", "allow", "", d.intercept)); err != nil {
		p.writeStatus(c, http.StatusServiceUnavailable, "agora egress proxy: the connection could not be audited, so it was not made.")
		return
	}
	start := time.Now()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.finish(t, 0, 0, start, 0, nil, err)
		return
	}
	if d.intercept {
		s := p.newSession(t, d, true, up)
		s.serveTLS(c, br)
		p.finish(t, s.up.n.Load(), s.down.n.Load(), start, s.requests, s.usedKeys(), s.err)
		return
	}
	upN, downN := p.tunnel(c, br, up)
	p.finish(t, upN, downN, start, 0, nil, nil)
}

// finish writes the net.close entry of an allowed connection and counts it.
func (p *Proxy) finish(t target, up, down int64, start time.Time, requests int, keys []string, err error) {
	p.count(t, true, up, down)
	var errText string
	if err != nil && !isClosed(err) && err != io.EOF {
		errText = p.shortError(err)
	}
	p.record(p.ctx, entry.NetClose, closeEntry(t, up, down, time.Since(start), requests, keys, errText))
}

// refuse records a refused connection, then answers 403 with the sentence.
func (p *Proxy) refuse(c net.Conn, t target, via, reason string) {
	p.count(t, false, 0, 0)
	p.record(p.ctx, entry.NetConnect, connectEntry(t, via, "deny", reason, false))
	sentence := refusalSentence(t, reason)
	p.notice(sentence)
	p.writeStatus(c, http.StatusForbidden, sentence)
}

// tunnel relays bytes both ways until both directions end; what the client sent after its
// CONNECT head (br's buffer) goes first. It returns the bytes sent up and down.
//
// A direction that ends cleanly (EOF) half-closes its destination, and the other direction
// may then stay silent for the linger time only: a peer that ignores the half-close (or
// keeps its side open after closing its writes) cannot pin the tunnel. A direction that
// fails (a reset, a write to a gone peer, the idle limit) closes both sides at once.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, up net.Conn) (upN, downN int64) {
	var prefix []byte
	if n := br.Buffered(); n > 0 {
		prefix, _ = br.Peek(n)
	}
	var act activity
	act.touch()
	act.limit.Store(int64(p.idle()))
	type result struct {
		upward bool
		n      int64
		err    error
	}
	done := make(chan result, 2)
	go func() { n, err := act.pipe(up, c, prefix); done <- result{true, n, err} }()
	go func() { n, err := act.pipe(c, up, nil); done <- result{false, n, err} }()
	for i := range 2 {
		r := <-done
		if r.upward {
			upN = r.n
		} else {
			downN = r.n
		}
		if i == 1 {
			break
		}
		if r.err != io.EOF {
			c.Close()
			up.Close()
			continue
		}
		// The direction that ended wrote to dst; the other one reads from it.
		dst := c
		if r.upward {
			dst = up
		}
		closeWrite(dst)
		act.limit.Store(int64(p.lingerTime()))
		dst.SetReadDeadline(time.Now()) // wake the other direction to apply the linger
	}
	return upN, downN
}

// activity is a tunnel's shared clock: the time of its last byte either way, and how long
// it may stay silent.
type activity struct {
	last  atomic.Int64 // unix nanoseconds
	limit atomic.Int64 // a time.Duration
}

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// pipe copies src to dst (prefix first) until src ends (io.EOF), an error, or the tunnel has
// been silent both ways for its limit (a timeout error).
func (a *activity) pipe(dst, src net.Conn, prefix []byte) (int64, error) {
	var written int64
	if len(prefix) > 0 {
		n, err := dst.Write(prefix)
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	buf := make([]byte, 32<<10)
	for {
		limit := time.Duration(a.limit.Load())
		src.SetReadDeadline(time.Now().Add(limit))
		if time.Duration(a.limit.Load()) != limit {
			continue // the limit changed while the deadline was set: set it again
		}
		n, err := src.Read(buf)
		if n > 0 {
			a.touch()
			dst.SetWriteDeadline(time.Now().Add(limit))
			w, werr := dst.Write(buf[:n])
			written += int64(w)
			if werr != nil {
				return written, werr
			}
		}
		if err != nil {
			if isTimeout(err) && time.Since(time.Unix(0, a.last.Load())) < time.Duration(a.limit.Load()) {
				continue // the other direction moved, or the limit changed: not idle
			}
			return written, err
		}
	}
}

// closeLinger is how long a tunnel's remaining direction may stay silent once the other has
// ended.
const closeLinger = 10 * time.Second

func (p *Proxy) lingerTime() time.Duration {
	if p.cfg.linger > 0 {
		return p.cfg.linger
	}
	return closeLinger
}

// idle is how long a connection may stay silent before the proxy ends it.
func (p *Proxy) idle() time.Duration {
	if p.cfg.IdleTimeout > 0 {
		return p.cfg.IdleTimeout
	}
	return defaultIdleTimeout
}

// closeWrite half-closes a connection that supports it, else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
