package mcpserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// Callers that wait on a dispatch (agora_dispatch for its end, agora_dispatch_describe with
// wait_seconds for its next change) share one poll of its record per dispatch, however many
// of them wait: each poll is a read of the record, and nothing (no database write, no lock)
// is held between polls. A waiter costs a goroutine parked on a channel.

// Poll intervals: quick while a dispatch is young, then at most pollMax apart.
const (
	pollMin = 50 * time.Millisecond
	pollMax = 500 * time.Millisecond
)

// pollTest, when set, replaces pollMin and pollMax: a test holds the polls off to see what
// the end signal alone does (atomic: an earlier test's poll may still be leaving).
var pollTest atomic.Pointer[[2]time.Duration]

// pollBounds returns the poll's first and longest intervals.
func pollBounds() (first, longest time.Duration) {
	if p := pollTest.Load(); p != nil {
		return p[0], p[1]
	}
	return pollMin, pollMax
}

// reportEvery is how often a waiter with a progress token hears that nothing changed.
const reportEvery = 5 * time.Second

// feed is the shared poll of one dispatch: the latest record and a channel closed (and
// replaced) each time the record read differs from the one before.
type feed struct {
	mu      sync.Mutex
	last    *Record
	failed  bool          // the last poll failed: waiters answer with what they have
	changed chan struct{} // closed on the next change
	// waiters and stop are guarded by the feeds' mu: stop closes when the last waiter leaves.
	waiters int
	stop    chan struct{}
}

// watch returns the current record and the channel closed at its next change.
func (f *feed) watch() (*Record, bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, f.failed, f.changed
}

// offer publishes r, a joiner's own read, when it is later than the feed's.
func (f *feed) offer(r *Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failed && newer(f.last, r) {
		f.publish(r)
	}
}

// set records a poll's read (or its failure) and wakes the waiters when it is news.
func (f *feed) set(r *Record, failed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case failed:
		f.failed = true
		f.publish(f.last)
	case rank(r) >= rank(f.last) && differs(f.last, r):
		f.publish(r)
	}
}

// publish makes r the feed's record and wakes every waiter; f.mu is held.
func (f *feed) publish(r *Record) {
	f.last = r
	close(f.changed)
	f.changed = make(chan struct{})
}

// differs reports whether b is news to someone who saw a: its state, phase or end.
func differs(a, b *Record) bool {
	return a.State != b.State || a.Phase != b.Phase || a.Done != b.Done || len(a.AwaitingApproval) != len(b.AwaitingApproval)
}

// rank orders a dispatch's states as they can only follow each other: accepted, started, an
// end, and answered after needs_input. Of two reads of one dispatch by different callers, one
// of lower rank is the older.
func rank(r *Record) int {
	switch {
	case r.State == lifecycle.DispatchAnswered:
		return 3
	case r.Done:
		return 2
	case r.State == lifecycle.DispatchAccepted:
		return 0
	}
	return 1
}

// newer reports whether cur is a later read of the dispatch than r, and says something r
// does not.
func newer(r, cur *Record) bool {
	return cur != nil && rank(cur) >= rank(r) && differs(r, cur)
}

// feeds is the server's set of shared polls, one per dispatch someone waits on.
type feeds struct {
	mu sync.Mutex
	by map[string]*feed
}

// join returns id's feed, starting its poll (seeded with r) when nobody waited on it, and
// the function that leaves it: the poll stops when its last waiter leaves.
func (s *Server) join(r *Record) (*feed, func()) {
	h := s.feeds
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[string]*feed{}
	}
	f := h.by[r.ID]
	if f == nil {
		f = &feed{last: r, changed: make(chan struct{}), stop: make(chan struct{})}
		h.by[r.ID] = f
		go s.poll(r.ID, f, f.stop)
	} else {
		// The joiner read the record just now: when that is later than what the feed
		// holds, the others hear it at once rather than at the next poll.
		f.offer(r)
	}
	f.waiters++
	return f, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		f.waiters--
		if f.waiters == 0 {
			delete(h.by, r.ID)
			close(f.stop)
		}
	}
}

// poll reads id's record until stop closes (its last waiter left) or the dispatch can no
// longer change. It belongs to no one caller, so no caller's end cuts a read short for the
// others.
func (s *Server) poll(id string, f *feed, stop <-chan struct{}) {
	interval, longest := pollBounds()
	signal, _ := s.cfg.Dispatcher.(EndSignal)
	var ended <-chan struct{}
	woken := false
	for {
		if signal != nil && ended == nil && !woken {
			// Asked again each round until there is one: a waiter may join before the
			// dispatcher has the signal of a dispatch it is starting.
			ended = signal.Ended(id)
		}
		timer := time.NewTimer(interval)
		select {
		case <-stop:
			timer.Stop()
			return
		case <-ended:
			ended, woken = nil, true // read now, once; the polls go on
		case <-timer.C:
		}
		timer.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := s.cfg.Dispatcher.Get(ctx, id)
		cancel()
		if err != nil {
			s.log.Warn("poll dispatch", "dispatch_id", id, "err", s.scrub(err.Error()))
			f.set(nil, true)
			return
		}
		f.set(r, false)
		if r.Final() {
			return
		}
		interval = min(2*interval, longest)
	}
}

// follow waits until done(record) holds, wait passes, ctx ends or a read fails, and returns
// the latest record. With a progress token the caller hears the state and the seconds elapsed
// at each change and every few seconds.
func (s *Server) follow(ctx context.Context, r *Record, wait time.Duration, done func(*Record) bool) *Record {
	progress := progressOf(ctx)
	report := func(r *Record) {
		progress(fmt.Sprintf("dispatch %s %s, %ds elapsed", r.ID, r.State, int(time.Since(r.CreatedAt).Seconds())))
	}
	report(r)
	if done(r) || wait <= 0 {
		return r
	}
	f, leave := s.join(r)
	defer leave()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	for {
		cur, failed, changed := f.watch()
		if newer(r, cur) {
			r = cur
			report(r)
		}
		if failed || done(r) {
			return r
		}
		select {
		case <-ctx.Done():
			return r
		case <-deadline.C:
			return r
		case <-tick.C:
			report(r)
		case <-changed:
		}
	}
}
