package web

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Readers never slow the engine: they read through connections of their own (ports.go), at
// most maxReads requests read at once, whatever the number of pages open, and a turn is
// given again only after a pause as long as the read took, so readers together take at most
// half of one core: on a two-core host the engine and its workers keep the rest. A page
// answers as soon as its read ends: the pause delays the next reader, not it.
//
// Readers never starve each other: the requests that wait are queued per client (the
// principal: a token's name, whether it came as a bearer token or through any of its
// sessions; never the source address, which a proxy shares), and turns go round the clients
// that wait, one request each, so a client with many requests waiting costs every other
// client at most one turn per turn of its own. A client holds at most maxClientWaiting
// requests in its queue; one more is refused at once (429, Retry-After) rather than waiting,
// and never takes another client's place. A request that waits longer than readWait is told
// to retry (503); one whose client goes away leaves its queue.
const (
	maxReads         = 1
	readWait         = 10 * time.Second
	maxClientWaiting = 32
)

// errTooMany: the request's client already had maxClientWaiting requests waiting.
var errTooMany = errors.New("too many reads waiting for this client; try again")

// gate gives turns to read, round-robin between the clients that wait.
type gate struct {
	n  int
	mu sync.Mutex
	// busy counts the turns taken (reading or pausing), at most n; queues holds each
	// client's waiting requests, oldest first, and order the clients that have any, in the
	// order their next turns come. All guarded by mu. A client with no request waiting has
	// no entry, so the maps hold no more than the requests waiting.
	busy   int
	queues map[string][]*waiter
	order  []string
}

// waiter is a request waiting for a turn.
type waiter struct {
	ready   chan struct{} // closed when the turn is given
	granted bool          // guarded by gate.mu
}

func newGate(n int) *gate { return &gate{n: n, queues: map[string][]*waiter{}} }

// enter waits for a turn of client until ctx ends or readWait passes: nil when it has one
// (end it with leave), errTooMany at once when client has maxClientWaiting requests waiting,
// errBusy when readWait passes, and ctx's error when ctx ends first.
func (g *gate) enter(ctx context.Context, client string) error {
	g.mu.Lock()
	// A turn is free only when nobody waits: release hands a turn straight to a waiter.
	if g.busy < g.n {
		g.busy++
		g.mu.Unlock()
		return nil
	}
	q := g.queues[client]
	if len(q) >= maxClientWaiting {
		g.mu.Unlock()
		return errTooMany
	}
	w := &waiter{ready: make(chan struct{})}
	if len(q) == 0 {
		g.order = append(g.order, client)
	}
	g.queues[client] = append(q, w)
	g.mu.Unlock()

	t := time.NewTimer(readWait)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = errBusy
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.granted {
		// The turn came as the wait ended: it is ours to end, so take it.
		return nil
	}
	g.remove(client, w)
	return err
}

// remove takes w out of client's queue, and client out of the order when nothing of it
// waits. g.mu is held.
func (g *gate) remove(client string, w *waiter) {
	q := slices.DeleteFunc(g.queues[client], func(x *waiter) bool { return x == w })
	if len(q) > 0 {
		g.queues[client] = q
		return
	}
	delete(g.queues, client)
	g.order = slices.DeleteFunc(g.order, func(c string) bool { return c == client })
}

// leave ends a turn that began at start, after a pause as long as the turn.
func (g *gate) leave(start time.Time) {
	if d := time.Since(start); d > time.Millisecond {
		time.AfterFunc(d, g.release)
		return
	}
	g.release()
}

// release gives an ended turn to the oldest request of the next client in the order, which
// then goes to the back of the order if more of it waits, or frees it when nobody waits.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.order) == 0 {
		g.busy--
		return
	}
	client := g.order[0]
	q := g.queues[client]
	w := q[0]
	w.granted = true
	close(w.ready)
	g.order = g.order[1:]
	if len(q) == 1 {
		delete(g.queues, client)
		return
	}
	g.queues[client] = q[1:]
	g.order = append(g.order, client)
}

// gated serves h in a turn of the reads gate, the request's principal's.
func (s *Server) gated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch err := s.reads.enter(r.Context(), principalOf(r.Context()).name); {
		case errors.Is(err, errTooMany):
			w.Header().Set("Retry-After", "1")
			s.refuse(w, r, http.StatusTooManyRequests, "too many pages being read for "+principalOf(r.Context()).name+": wait for them, then try again")
			return
		case err != nil:
			w.Header().Set("Retry-After", "1")
			s.refuse(w, r, http.StatusServiceUnavailable, "busy: too many pages are being read; try again")
			return
		}
		defer s.reads.leave(time.Now())
		h(w, r)
	}
}

// read runs fn in a turn of the reads gate, the principal of ctx's, for a handler that is
// not gated as a whole (an event stream, which waits between its reads).
func (s *Server) read(ctx context.Context, fn func() error) error {
	if err := s.reads.enter(ctx, principalOf(ctx).name); err != nil {
		return err
	}
	defer s.reads.leave(time.Now())
	return fn()
}
