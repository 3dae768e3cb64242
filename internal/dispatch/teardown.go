package dispatch

import "sync"

// BackgroundTeardowns makes every later Supervise of d return as soon as the dispatch's end
// is recorded and reported and its logs are closed, and release the rest after it returns:
// the sandbox's host side, the stage's disk quota (an unmount) and its files, the uid lease.
// The returned wait waits for the releases begun so far. A long-lived process calls it once,
// before its first Supervise, and waits before it exits: the resident dispatcher, whose
// caller (the one-shot CLI) then exits without waiting for the unmount. Without it,
// Supervise releases everything before it returns, as a process that may exit right after
// needs. A process killed while a release runs leaves what a killed supervisor leaves: a
// held stage that Reap takes.
func (d *Dispatcher) BackgroundTeardowns() (wait func()) {
	d.teardowns = new(sync.WaitGroup)
	return d.teardowns.Wait
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
	d.teardowns.Go(release)
}
