package dispatch

import (
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// limitTrip is how host-side enforcers (the gateway's audit budget, the disk quota, the
// dispatch's spending budget) end a dispatch that exceeded a limit: the first Trip records
// why and fires C, which kills the sandbox; reconcile then ends the dispatch failed with
// that reason and detail, whatever the worker wrote. It is the host's own observation, so it
// outranks result.json.
type limitTrip struct {
	fireOnce sync.Once
	mu       sync.Mutex
	reason   string
	detail   string
	fired    chan struct{}
}

func newLimitTrip() *limitTrip { return &limitTrip{fired: make(chan struct{})} }

// Trip records detail as limit-exceeded (the first reason recorded wins) and fires C. Safe
// from any goroutine, repeatedly.
func (t *limitTrip) Trip(detail string) {
	t.note(lifecycle.ReasonLimitExceeded, detail)
	t.fire()
}

// TripBudget records detail as budget-exceeded (the first reason recorded wins) and fires C
// after grace: the agent first reads the gateway's refusal and may end on its own.
func (t *limitTrip) TripBudget(detail string, grace time.Duration) {
	if t.note(lifecycle.ReasonBudgetExceeded, detail) {
		time.AfterFunc(grace, t.fire)
	}
}

// note records reason and detail unless a reason is recorded already; it reports whether
// this call recorded them.
func (t *limitTrip) note(reason, detail string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reason != "" {
		return false
	}
	t.reason, t.detail = reason, detail
	return true
}

func (t *limitTrip) fire() { t.fireOnce.Do(func() { close(t.fired) }) }

// C is closed once a limit stops the sandbox.
func (t *limitTrip) C() <-chan struct{} { return t.fired }

// Reason is the failure reason of the limit that tripped, or "".
func (t *limitTrip) Reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason
}

// Detail is why the limit tripped, or "" when it did not.
func (t *limitTrip) Detail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.detail
}
