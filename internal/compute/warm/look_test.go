package warm

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestPool_RefillsADeadSlotNobodyPruned: a ready slot dies while it waits and no holder says
// so (a Dispatcher's own pool: nothing watches its slots). The pool finds it on its own look,
// counts it failed, discards it and fills again, so it never sits counted as ready-but-dead
// until a claim finds it (a dispatch that then goes cold), and a test waiting for a ready
// slot never waits on one that died in the pool.
func TestPool_RefillsADeadSlotNobodyPruned(t *testing.T) {
	synctest.Test(t, testPoolRefillsADeadSlotNobodyPruned)
}

func testPoolRefillsADeadSlotNobodyPruned(t *testing.T) {
	var mu sync.Mutex
	var made []*liveSlot
	p := New(t.Context(), "local", 1, func(context.Context) (Slot, error) {
		s := &liveSlot{fakeSlot: fakeSlot{shape: "s"}}
		mu.Lock()
		made = append(made, s)
		mu.Unlock()
		return s, nil
	})
	defer p.Close()
	settled(t, p, 1)
	mu.Lock()
	first := made[0]
	mu.Unlock()
	first.dead.Store(true)
	settled(t, p, 0) // counted ready no more, and not yet found by the pool
	time.Sleep(lookEvery)
	settled(t, p, 1)
	mu.Lock()
	n := len(made)
	mu.Unlock()
	if c := p.Counts(); n != 2 || c.Failed != 1 || c.Claimed != 0 || c.Cold != 0 {
		t.Errorf("after the death: %d fills, counts %+v; want 2 fills, failed 1", n, c)
	}
	if s := p.Claim("s"); s == first || s == nil {
		t.Errorf("the claim got %p, want the new slot (not the dead %p)", s, first)
	}
}
