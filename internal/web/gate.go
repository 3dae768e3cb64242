package web

import (
	"context"
	"net/http"
	"time"
)

// Readers never slow the engine: they read through connections of their own (ports.go), at
// most maxReads requests read at once, whatever the number of pages open, and a turn is
// given again only after a pause as long as the read took, so readers together take at most
// half of one core: on a two-core host the engine and its workers keep the rest. The others
// wait their turn, at most readWait, and are then told to retry (503). A page answers as
// soon as its read ends: the pause delays the next reader, not it.
const (
	maxReads = 1
	readWait = 10 * time.Second
)

// gate is the semaphore of reads.
type gate chan struct{}

func newGate(n int) gate { return make(gate, n) }

// enter waits for a turn until ctx ends or readWait passes; leave ends it.
func (g gate) enter(ctx context.Context) bool {
	t := time.NewTimer(readWait)
	defer t.Stop()
	select {
	case g <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// leave ends a turn that began at start, after a pause as long as the turn.
func (g gate) leave(start time.Time) {
	if d := time.Since(start); d > time.Millisecond {
		time.AfterFunc(d, func() { <-g })
		return
	}
	<-g
}

// gated serves h in a turn of the reads gate.
func (s *Server) gated(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.reads.enter(r.Context()) {
			w.Header().Set("Retry-After", "1")
			s.refuse(w, r, http.StatusServiceUnavailable, "busy: too many pages are being read; try again")
			return
		}
		defer s.reads.leave(time.Now())
		h(w, r)
	}
}

// read runs fn in a turn of the reads gate, for a handler that is not gated as a whole (an
// event stream, which waits between its reads).
func (s *Server) read(ctx context.Context, fn func() error) error {
	if !s.reads.enter(ctx) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errBusy
	}
	defer s.reads.leave(time.Now())
	return fn()
}
