package netgw

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// Connection limits of the server. A connection is unauthenticated ("pending") from its accept
// until a request on it carries a dispatch's valid token; it is then charged to that dispatch.
// Nothing ever queues. An authenticated limit refuses by closing the new connection at once. A
// full pending pool (of the server, or of one source) closes its OLDEST pending connection
// instead, so holding connections idle wins an attacker nothing: a pod that shares its
// source address with an attacker (pods behind one NAT address) still gets its handshake
// done, since the attacker would have to open MaxPendingPerSource new connections within that
// handshake to push it out.
//
// Every dispatch has a reserve of connections no other can take (ReservePerDispatch): those
// are never refused for the server's sake, only beyond the dispatch's own cap. What dispatches
// hold beyond their reserves comes from one shared pool (MaxConns), so dispatches that open
// every tunnel they may (an agent's doing) can fill the pool, but never keep another dispatch
// from its session, its streams, its upload and a few tunnels (16
// dispatches of 256 tunnels each would fill the whole server).
const (
	// MaxConns caps the authenticated connections dispatches hold beyond their reserves, all
	// together, tunnels included.
	MaxConns = 4096
	// ReservePerDispatch is how many connections each dispatch holds whatever the others
	// hold: its session and fetch requests, its secrets, its two streams, its upload and a
	// handful of tunnels.
	ReservePerDispatch = 16
	// ReserveForRequests is how many of a dispatch's reserve its tunnels may not take: its two
	// streams, its upload and one request. An agent's tunnels can outlast it (the gateway's
	// end of one closes only when the host's does), and with the shared pool full (a subagent
	// run wide) they took the whole reserve, so the worker's upload found no room anywhere
	// and the dispatch ended gateway-unreachable.
	ReserveForRequests = 4
	// MaxPending caps the unauthenticated connections of all peers at once, apart from
	// MaxConns: peers without a token cannot take what dispatches hold.
	MaxPending = 1024
	// MaxPendingPerSource caps the unauthenticated connections of one source IP address, so
	// one pod (any peer that can reach the gateway) cannot take every pending slot. A worker
	// opens a handful at a time and each stays pending for milliseconds; raise it when many
	// pods reach the gateway through one NAT address.
	MaxPendingPerSource = 32
	// MaxConnsPerDispatch caps the authenticated connections of one dispatch: its tunnels,
	// its two streams, an upload, a file and a few requests.
	MaxConnsPerDispatch = MaxTunnels + 32
	// PreAuthTimeout bounds a connection's unauthenticated life: its TLS handshake and its
	// first request's header must be done, with a valid token, within it, or it is closed.
	PreAuthTimeout = 5 * time.Second
	// refusalLogEvery spaces the log lines of one kind of refusal: an unauthenticated peer
	// must not be able to flood the log. The suppressed count is logged with the next line.
	refusalLogEvery = time.Second
)

// connTable counts the server's connections by state, source and dispatch.
type connTable struct {
	maxConns, maxPending, maxPerSource, maxPerDispatch, reserve int
	preAuth                                                     time.Duration
	refusals                                                    *refusalLog

	mu         sync.Mutex
	order      list.List             // guarded by mu: pending connections, oldest first
	bySource   map[string]*list.List // guarded by mu: pending connections per source IP, oldest first
	shared     int                   // guarded by mu: authenticated connections beyond their dispatch's reserve
	byDispatch map[string]int        // guarded by mu: authenticated connections per dispatch
	reserved   map[string]int        // guarded by mu: of those, the ones in the dispatch's reserve
}

// gateConn is an accepted connection and its place in the table.
type gateConn struct {
	net.Conn
	t      *connTable
	source string
	timer  *time.Timer
	once   sync.Once

	dispatch  string        // guarded by t.mu: the dispatch it is charged to; "" while pending
	inReserve bool          // guarded by t.mu: it is in its dispatch's reserve, not the shared pool
	expired   bool          // guarded by t.mu: the pre-auth timeout, or an eviction, closed it
	counted   bool          // guarded by t.mu: it is in the pending counts and lists
	elem      *list.Element // guarded by t.mu: its place in t.order
	srcElem   *list.Element // guarded by t.mu: its place in t.bySource[source]
}

// gateListener admits the connections the table has room for and closes the others.
type gateListener struct {
	net.Listener
	t *connTable
}

func (l *gateListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := l.t.admit(c); gc != nil {
			return gc, nil
		}
	}
}

// admit counts c as pending. When the server's or its source's pending pool is full, the
// oldest pending connection of that pool is closed to make room (see the constants).
func (t *connTable) admit(c net.Conn) *gateConn {
	src := sourceOf(c.RemoteAddr())
	gc := &gateConn{Conn: c, t: t, source: src}
	// The timer is set before gc is in the lists, where an eviction may close it at once.
	gc.timer = time.AfterFunc(t.preAuth, gc.expire)
	t.mu.Lock()
	var evict *gateConn
	reason := ""
	switch {
	case t.bySource[src] != nil && t.bySource[src].Len() >= t.maxPerSource:
		reason = "too many unauthenticated connections from this source; closed its oldest"
		if l := t.bySource[src]; l.Front() != nil {
			evict = l.Front().Value.(*gateConn)
		}
	case t.order.Len() >= t.maxPending:
		reason = "too many unauthenticated connections; closed the oldest"
		if t.order.Front() != nil {
			evict = t.order.Front().Value.(*gateConn)
		}
	}
	if reason != "" && evict == nil { // a pool of size 0: nothing to evict
		t.mu.Unlock()
		gc.timer.Stop()
		c.Close()
		t.refusals.refuse("too many unauthenticated connections", src)
		return nil
	}
	if evict != nil {
		t.unpend(evict)
		evict.expired = true
	}
	t.pend(gc)
	t.mu.Unlock()
	if evict != nil {
		evict.Close()
		t.refusals.refuse(reason, evict.source)
	}
	return gc
}

// expire closes gc when no valid token came on it in time.
func (gc *gateConn) expire() {
	gc.t.mu.Lock()
	if gc.dispatch != "" {
		gc.t.mu.Unlock()
		return
	}
	gc.expired = true
	gc.t.mu.Unlock()
	gc.Close()
	gc.t.refusals.refuse("no valid request in time", gc.source)
}

// claim charges gc to dispatch id after a request on it carried id's valid token: to id's
// reserve while it has room (a tunnel's room ends ReserveForRequests short of it), else to the
// shared pool. A connection already charged stays with its dispatch. It returns why not when
// id, or the shared pool, has no room.
func (t *connTable) claim(gc *gateConn, id string, tunnel bool) (ok bool, reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	room := t.reserve
	if tunnel {
		room -= min(ReserveForRequests, t.reserve)
	}
	inReserve := t.reserved[id] < room
	switch {
	case gc.dispatch != "":
		return true, ""
	case gc.expired:
		return false, "the connection timed out before its token was checked"
	case t.byDispatch[id] >= t.maxPerDispatch:
		return false, "too many connections for this dispatch"
	case !inReserve && t.shared >= t.maxConns:
		return false, "the gateway is at its connection limit"
	}
	gc.timer.Stop()
	t.unpend(gc)
	if t.byDispatch == nil {
		t.byDispatch, t.reserved = map[string]int{}, map[string]int{}
	}
	t.byDispatch[id]++
	if inReserve {
		t.reserved[id]++
	} else {
		t.shared++
	}
	gc.dispatch, gc.inReserve = id, inReserve
	return true, ""
}

// charged reports whether gc is charged to a dispatch.
func (t *connTable) charged(gc *gateConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return gc.dispatch != ""
}

// pend counts gc as pending of its source; t.mu is held.
func (t *connTable) pend(gc *gateConn) {
	if t.bySource == nil {
		t.bySource = map[string]*list.List{}
	}
	l := t.bySource[gc.source]
	if l == nil {
		l = list.New()
		t.bySource[gc.source] = l
	}
	gc.elem, gc.srcElem = t.order.PushBack(gc), l.PushBack(gc)
	gc.counted = true
}

// unpend takes a pending gc off the counts and lists, once; t.mu is held.
func (t *connTable) unpend(gc *gateConn) {
	if !gc.counted {
		return
	}
	gc.counted = false
	t.order.Remove(gc.elem)
	if l := t.bySource[gc.source]; l != nil {
		l.Remove(gc.srcElem)
		if l.Len() == 0 {
			delete(t.bySource, gc.source)
		}
	}
}

func (gc *gateConn) Close() error {
	err := gc.Conn.Close()
	gc.once.Do(func() {
		gc.timer.Stop()
		t := gc.t
		t.mu.Lock()
		defer t.mu.Unlock()
		if gc.dispatch == "" {
			t.unpend(gc)
			return
		}
		if gc.inReserve {
			if t.reserved[gc.dispatch]--; t.reserved[gc.dispatch] <= 0 {
				delete(t.reserved, gc.dispatch)
			}
		} else {
			t.shared--
		}
		if t.byDispatch[gc.dispatch]--; t.byDispatch[gc.dispatch] <= 0 {
			delete(t.byDispatch, gc.dispatch)
		}
	})
	return err
}

// sourceOf is the IP address of a peer, the unit of the per-source cap.
func sourceOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

type connKey struct{}

// withConn is the server's ConnContext: requests find their connection's table entry.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*gateConn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// connOf returns the connection a request came on; nil when it came on none the table
// knows, which the handler refuses.
func connOf(ctx context.Context) *gateConn {
	gc, _ := ctx.Value(connKey{}).(*gateConn)
	return gc
}

// refusalLog logs refused connections, at most one line per reason every refusalLogEvery,
// with how many it did not log since. A line names the source and the reason, never a token
// (no token was read).
type refusalLog struct {
	log func(reason, source string, suppressed int)

	mu    sync.Mutex
	last  map[string]time.Time // guarded by mu
	quiet map[string]int       // guarded by mu: refusals not logged since last
}

func (r *refusalLog) refuse(reason, source string) {
	now := time.Now()
	r.mu.Lock()
	if r.last == nil {
		r.last, r.quiet = map[string]time.Time{}, map[string]int{}
	}
	if now.Sub(r.last[reason]) < refusalLogEvery {
		r.quiet[reason]++
		r.mu.Unlock()
		return
	}
	n := r.quiet[reason]
	r.last[reason], r.quiet[reason] = now, 0
	r.mu.Unlock()
	r.log(reason, source, n)
}
