package proxy

import (
	"io"
	"net/http"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// plain forwards one plain-HTTP request (absolute form) and, while the client keeps its
// connection and names the same host, the ones after it. It reports whether the client
// connection may carry another request (to another host: the caller reads it).
func (p *Proxy) plain(cl *client, req *http.Request) bool {
	c := cl.Conn
	if !req.URL.IsAbs() || req.URL.Scheme != "http" {
		io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
		p.writeStatus(c, http.StatusBadRequest, "agora egress proxy: want an absolute http:// URL, or CONNECT for https.")
		return false
	}
	t, err := parseAuthority(req.URL.Host, 80)
	if err != nil {
		p.writeStatus(c, http.StatusBadRequest, "agora egress proxy: bad host in the URL ("+err.Error()+").")
		return false
	}
	d := p.decide(t, false)
	if !d.allowed {
		p.refuse(c, t, "http", d.reason)
		return false
	}
	// The first request is judged before a connection is made for it.
	s := p.newSession(t, d, false, nil)
	if reason := s.judge(req); reason != "" {
		io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
		s.refuseRequest(c, req, reason)
		return false
	}
	up, refused, err := p.dial(p.ctx, t)
	if refused != "" {
		p.refuse(c, t, "http", refused)
		return false
	}
	if err != nil {
		p.record(p.ctx, entry.NetConnect, connectEntry(t, "http", "error", "connect failed: "+p.shortError(err), false))
		p.writeStatus(c, http.StatusBadGateway, "agora egress proxy: could not connect to "+t.String()+": "+p.shortError(err)+".")
		return false
	}
	if d.learn {
		if err := p.wouldDeny(t, "http", "", "", d.reason); err != nil {
			up.Close()
			p.writeStatus(c, http.StatusServiceUnavailable, "agora egress proxy: the connection could not be audited, so it was not made.")
			return false
		}
	}
	if err := p.record(p.ctx, entry.NetConnect, connectEntry(t, "http", "allow", "", false)); err != nil {
		up.Close()
		p.writeStatus(c, http.StatusServiceUnavailable, "agora egress proxy: the connection could not be audited, so it was not made.")
		return false
	}
	start := time.Now()
	s.raw = up
	defer func() {
		s.closeUpstream()
		p.finish(t, s.up.n.Load(), s.down.n.Load(), start, s.requests, s.usedKeys(), s.err)
	}()
	for {
		if !s.forward(c, cl.br, req) {
			return false
		}
		// The next request on this connection: the same host continues the session.
		next, err := cl.readRequest(p.idle())
		if err != nil {
			return false
		}
		if !p.authorized(next) {
			writeAuthRequired(c)
			return false
		}
		nt, err := parseAuthority(next.URL.Host, 80)
		if next.Method == http.MethodConnect || !next.URL.IsAbs() || next.URL.Scheme != "http" || err != nil || nt != t {
			p.writeStatus(c, http.StatusBadRequest, "agora egress proxy: one connection per host; open a new connection for another host.")
			return false
		}
		req = next
	}
}
