package warm

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestRedTeam31_PruneRefillsDeadSlots: every ready slot dies at once and the
// holder learns it (a standby supervisor exits when its sandbox dies). Prune takes them out
// (counted failed, each discarded once) and the pool refills to want after its pause,
// without waiting for a claim to find them dead; a second Prune finds nothing to count.
func TestRedTeam31_PruneRefillsDeadSlots(t *testing.T) {
	synctest.Test(t, testRedTeam31PruneRefillsDeadSlots)
}

func testRedTeam31PruneRefillsDeadSlots(t *testing.T) {
	var mu sync.Mutex
	var made []*liveSlot
	var fills atomic.Int32
	p := New(t.Context(), "local", 2, func(context.Context) (Slot, error) {
		fills.Add(1)
		s := &liveSlot{fakeSlot: fakeSlot{shape: "s"}}
		mu.Lock()
		made = append(made, s)
		mu.Unlock()
		return s, nil
	})
	defer p.Close()
	settled(t, p, 2)
	mu.Lock()
	first := append([]*liveSlot(nil), made...)
	mu.Unlock()
	for _, s := range first {
		s.dead.Store(true)
	}
	p.Prune()
	p.Prune()
	if c := p.Counts(); c.Failed != 2 || c.Ready != 0 {
		t.Errorf("after Prune: %+v, want failed 2, ready 0", c)
	}
	// The refill waits out its pause, then tops the pool up.
	settled(t, p, 0)
	for _, s := range first {
		if n := s.discarded.Load(); n != 1 {
			t.Fatalf("a dead slot was discarded %d times, want 1", n)
		}
	}
	time.Sleep(retryPause - time.Millisecond)
	settled(t, p, 0)
	time.Sleep(time.Millisecond)
	settled(t, p, 2)
	if n := fills.Load(); n != 4 {
		t.Errorf("%d fills, want 4 (2, then 2 for the dead)", n)
	}
	if c := p.Counts(); c.Claimed != 0 || c.Cold != 0 {
		t.Errorf("counts %+v: nothing was claimed", c)
	}
}
