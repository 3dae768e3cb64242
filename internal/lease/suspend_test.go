package lease

import (
	"testing"
	"time"
)

// TestElector_SuspendedLeaderFencedOnResume is the attack of a leader whose host sleeps through
// a takeover: replica-a renews, its host is suspended (its boot clock jumps by the time asleep
// on resume, its monotonic clock does not), replica-b waits the whole duration unrenewed on its
// own clock and takes the Lease. On resume, before any renew, replica-a's fence is shut; its
// next try sees replica-b holding the Lease.
func TestElector_SuspendedLeaderFencedOnResume(t *testing.T) {
	const d = 10 * time.Second
	api := &memLeases{}
	ca, cb := newFakeClock(), newFakeClock()
	a, b := testElector(api, "replica-a", d), testElector(api, "replica-b", d)
	a.fence.now, b.fence.now = ca.now, cb.now
	if ok, _ := a.try(t.Context()); !ok {
		t.Fatal("replica-a did not create the Lease")
	}
	if ok, _ := b.try(t.Context()); ok {
		t.Fatal("replica-b took a Lease it had just seen renewed")
	}
	cb.advance(d) // replica-a's host sleeps; replica-b's clock runs
	if ok, _ := b.try(t.Context()); !ok {
		t.Fatal("replica-b did not take the Lease after a whole duration unrenewed")
	}
	ca.advance(d + time.Second) // replica-a resumes: its boot clock counted the sleep
	if err := a.fence.Check(); err == nil {
		t.Fatal("replica-a resumed after a takeover with its fence open")
	}
	if ok, holder := a.try(t.Context()); ok || holder != "replica-b" {
		t.Fatalf("replica-a after resume: renewed %v, holder %q; want replica-b holding", ok, holder)
	}
}
