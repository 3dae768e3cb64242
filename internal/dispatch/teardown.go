package dispatch

import (
	"context"
	"sync"
)

// BackgroundTeardowns makes every later Supervise of d return as soon as the dispatch's end
// is recorded and reported and its logs are closed, and release the rest after it returns:
// the sandbox's host side, the stage's disk quota (an unmount) and its files, the uid lease.
// The returned wait waits for the releases begun so far (none begins once no Supervise runs). A long-lived process calls it once,
// before its first Supervise, and waits before it exits: the resident dispatcher, whose
// caller (the one-shot CLI) then exits without waiting for the unmount. Without it,
// Supervise releases everything before it returns, as a process that may exit right after
// needs. A process killed while a release runs leaves what a killed supervisor leaves: a
// held stage that Reap takes.
//
// A dispatch that finds no free sandbox uid waits for the releases running then and tries
// again: the uid a release still holds is its own process's, and a dispatch started after
// another's end is not refused for that one's uid (a target's range may be one uid).
func (d *Dispatcher) BackgroundTeardowns() (wait func()) {
	t := &teardowns{pending: map[chan struct{}]struct{}{}}
	d.teardowns = t
	return func() { t.settle(context.Background()) }
}

// teardowns are the releases Supervise leaves running after it returns.
type teardowns struct {
	mu      sync.Mutex
	pending map[chan struct{}]struct{} // guarded by mu: one for each release running, closed when it ends
}

// start runs release in the background.
func (t *teardowns) start(release func()) {
	done := make(chan struct{})
	t.mu.Lock()
	t.pending[done] = struct{}{}
	t.mu.Unlock()
	go func() {
		defer close(done)
		release()
		t.mu.Lock()
		delete(t.pending, done)
		t.mu.Unlock()
	}()
}

// settle waits until the releases running now have ended (not those begun later), or ctx
// ends, and reports whether they did.
func (t *teardowns) settle(ctx context.Context) bool {
	t.mu.Lock()
	running := make([]chan struct{}, 0, len(t.pending))
	for c := range t.pending {
		running = append(running, c)
	}
	t.mu.Unlock()
	for _, c := range running {
		select {
		case <-c:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// tearDown ends s's supervision: its logs and network now, the rest now or, after
// BackgroundTeardowns, in the background.
func (d *Dispatcher) tearDown(s *supervision) {
	s.closeLogs()
	_ = s.gw.close()
	release := s.release
	if hold := d.testOnlyBeforeRelease; hold != nil {
		release = func() { hold(); s.release() }
	}
	if d.teardowns == nil {
		release()
		return
	}
	d.teardowns.start(release)
}

// settleTeardowns waits for this process's background releases running now (see
// BackgroundTeardowns) and reports whether a lease refused before it may be tried again:
// true once they have ended, even none, for one may have ended between the refusal and
// this wait.
func (d *Dispatcher) settleTeardowns(ctx context.Context) bool {
	if d.teardowns == nil {
		return false
	}
	if hook := d.testOnlySettling; hook != nil {
		hook()
	}
	return d.teardowns.settle(ctx)
}
