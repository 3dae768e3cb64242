package web

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Wrong tokens are limited per source, and only wrong ones: a correct token is checked first
// (in constant time) and always gets in, so nobody who can reach the port locks anyone else
// out, and a source's own flood does not lock out a person behind the same address.
const (
	// loginRate and loginBurst bound one source's wrong tokens.
	loginRate  = 2
	loginBurst = 10
	// maxLoginSources bounds the table of sources with recent failures: a full table first
	// drops sources whose budget has refilled, then the one that failed longest ago.
	maxLoginSources = 4096
)

// loginLimiter keeps a token bucket of failures per source: an IPv4 address, or the /64 of an
// IPv6 address (one host commonly holds a whole /64).
type loginLimiter struct {
	now func() time.Time

	mu sync.Mutex
	// sources are the buckets by source; guarded by mu.
	sources map[netip.Prefix]*sourceBucket
}

type sourceBucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{now: time.Now, sources: map[netip.Prefix]*sourceBucket{}}
}

// sourceOf is the source of a request's remote address ("" host: the zero prefix, one source
// for everything unparseable).
func sourceOf(remote string) netip.Prefix {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	return prefixOf(a)
}

func prefixOf(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// failed charges one wrong token to source and reports whether the source is still within
// its budget (false: answer 429).
func (l *loginLimiter) failed(a netip.Addr) bool {
	src, now := prefixOf(a), l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.sources[src]
	if b == nil {
		l.makeRoom(now)
		b = &sourceBucket{lim: rate.NewLimiter(loginRate, loginBurst)}
		l.sources[src] = b
	}
	b.last = now
	return b.lim.AllowN(now, 1)
}

// makeRoom keeps the table under maxLoginSources. l.mu is held.
func (l *loginLimiter) makeRoom(now time.Time) {
	if len(l.sources) < maxLoginSources {
		return
	}
	var oldest netip.Prefix
	var oldestAt time.Time
	for src, b := range l.sources {
		if b.lim.TokensAt(now) >= loginBurst {
			delete(l.sources, src) // refilled: it holds nothing worth keeping
			continue
		}
		if oldestAt.IsZero() || b.last.Before(oldestAt) {
			oldest, oldestAt = src, b.last
		}
	}
	if len(l.sources) >= maxLoginSources {
		delete(l.sources, oldest)
	}
}
