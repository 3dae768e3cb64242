package dispatch

import (
	"sync"
)

// limitTrip is how host-side enforcers (the gateway's audit budget, the disk quota) end a
// dispatch that exceeded a limit: the first Trip records why and fires C, which kills the
// sandbox; reconcile then ends the dispatch failed/limit-exceeded with that detail, whatever
// the worker wrote. It is the host's own observation, so it outranks result.json.
type limitTrip struct {
	once   sync.Once
	mu     sync.Mutex
	detail string
	fired  chan struct{}
}

func newLimitTrip() *limitTrip { return &limitTrip{fired: make(chan struct{})} }

// Trip records detail (the first one wins) and fires C. Safe from any goroutine, repeatedly.
func (t *limitTrip) Trip(detail string) {
	t.once.Do(func() {
		t.mu.Lock()
		t.detail = detail
		t.mu.Unlock()
		close(t.fired)
	})
}

// C is closed by the first Trip.
func (t *limitTrip) C() <-chan struct{} { return t.fired }

// Detail is why the limit tripped, or "" when it did not.
func (t *limitTrip) Detail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.detail
}
