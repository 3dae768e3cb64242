package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// connect serves a CONNECT: decide, dial, record, then tunnel or terminate.
func (p *Proxy) connect(cl *client, req *http.Request) {
	c, br := cl.Conn, cl.br
	t, err := parseAuthority(req.RequestURI, 0)
	if err != nil {
		writeStatus(c, http.StatusBadRequest, "agora egress proxy: CONNECT wants host:port ("+err.Error()+").")
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
		p.record(p.ctx, KindConnect, connectEntry(t, "connect", "error", "connect failed: "+shortError(err), d.intercept))
		writeStatus(c, http.StatusBadGateway, "agora egress proxy: could not connect to "+t.String()+": "+shortError(err)+".")
		return
	}
	defer up.Close()
	// Recorded before a byte of the client reaches the host.
	if err := p.record(p.ctx, KindConnect, connectEntry(t, "connect", "allow", "", d.intercept)); err != nil {
		writeStatus(c, http.StatusServiceUnavailable, "agora egress proxy: the connection could not be audited, so it was not made.")
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
	upN, downN := tunnel(c, br, up)
	p.finish(t, upN, downN, start, 0, nil, nil)
}

// finish writes the net.close entry of an allowed connection and counts it.
func (p *Proxy) finish(t target, up, down int64, start time.Time, requests int, keys []string, err error) {
	p.count(t, true, up, down)
	var errText string
	if err != nil && !isClosed(err) && err != io.EOF {
		errText = shortError(err)
	}
	p.record(p.ctx, KindClose, closeEntry(t, up, down, time.Since(start), requests, keys, errText))
}

// refuse records a refused connection, then answers 403 with the sentence.
func (p *Proxy) refuse(c net.Conn, t target, via, reason string) {
	p.count(t, false, 0, 0)
	p.record(p.ctx, KindConnect, connectEntry(t, via, "deny", reason, false))
	sentence := refusalSentence(t, reason)
	p.notice(sentence)
	writeStatus(c, http.StatusForbidden, sentence)
}

// tunnel relays bytes both ways until both directions end; what the client sent after its
// CONNECT head (br's buffer) goes first. It returns the bytes sent up and down.
func tunnel(c net.Conn, br *bufio.Reader, up net.Conn) (upN, downN int64) {
	var wg sync.WaitGroup
	wg.Go(func() {
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			w, _ := up.Write(b)
			upN += int64(w)
		}
		n, _ := io.Copy(up, c)
		upN += n
		closeWrite(up)
	})
	n, _ := io.Copy(c, up)
	downN = n
	closeWrite(c)
	wg.Wait()
	return upN, downN
}

// closeWrite half-closes a connection that supports it, else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}
