package warm

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// liveSlot is a slot whose sandbox can die while it waits.
type liveSlot struct {
	fakeSlot
	dead atomic.Bool
}

func (s *liveSlot) Alive() bool { return !s.dead.Load() }

// TestRedTeam30_DeadSlotNeitherReadyNorClaimed: a ready slot whose sandbox was
// killed while it waited must not be counted ready (doctor, metrics and the web view would
// say "warm 1/1 ready" of nothing) nor handed to a claim (the dispatch would run in nothing);
// it is counted failed and refilled.
func TestRedTeam30_DeadSlotNeitherReadyNorClaimed(t *testing.T) {
	synctest.Test(t, testRedTeam30DeadSlotNeitherReadyNorClaimed)
}

func testRedTeam30DeadSlotNeitherReadyNorClaimed(t *testing.T) {
	var made atomic.Int32
	var first *liveSlot
	p := New(t.Context(), "local", 1, func(context.Context) (Slot, error) {
		s := &liveSlot{fakeSlot: fakeSlot{id: int(made.Add(1)), shape: "s"}}
		if first == nil {
			first = s
		}
		return s, nil
	})
	defer p.Close()
	settled(t, p, 1)
	first.dead.Store(true)
	if c := p.Counts(); c.Ready != 0 {
		t.Errorf("a dead slot is counted ready: %+v", c)
	}
	got := p.Claim("s")
	if got == Slot(first) {
		t.Fatal("a dead slot was handed to a claim")
	}
	if c := p.Counts(); c.Failed != 1 {
		t.Errorf("the dead slot is not counted failed: %+v", c)
	}
	// No time passes: the claim that found it dead has it discarded and the pool refilled.
	settled(t, p, 1)
	if n := first.discarded.Load(); n != 1 {
		t.Fatalf("the dead slot was discarded %d times, want 1", n)
	}
}

// TestRedTeam30_DyingSlotsDoNotSpin: every slot the fill makes is dead at once (a broken
// sandbox, a killer on the host). The pool must not spin refilling them: a fill per slot
// wanted, and one more per claim that finds them dead, never a loop of its own.
func TestRedTeam30_DyingSlotsDoNotSpin(t *testing.T) {
	synctest.Test(t, testRedTeam30DyingSlotsDoNotSpin)
}

func testRedTeam30DyingSlotsDoNotSpin(t *testing.T) {
	var fills atomic.Int32
	p := New(t.Context(), "local", 4, func(ctx context.Context) (Slot, error) {
		if fills.Add(1) > 100 {
			// A spinning refill never waits, and the bubble's clock would wait for it for
			// ever: past any count the test allows, the fill holds it, and the count tells.
			<-ctx.Done()
			return nil, ctx.Err()
		}
		s := &liveSlot{fakeSlot: fakeSlot{shape: "s"}}
		s.dead.Store(true)
		return s, nil
	})
	defer p.Close()
	// Until its next look (lookEvery) the pool waits: four fills, and no more however long.
	synctest.Wait()
	time.Sleep(lookEvery - time.Millisecond)
	synctest.Wait()
	if n := fills.Load(); n != 4 {
		t.Fatalf("%d fills with no claim for a pool of 4 whose slots die at once, want 4: the refill spins", n)
	}
	for range 10 {
		if s := p.Claim("s"); s != nil {
			t.Fatal("a dead slot was claimed")
		}
		p.Counts()
	}
	synctest.Wait()
	if n := fills.Load(); n > 4+4*10 {
		t.Fatalf("%d fills after 10 claims: the refill spins", n)
	}
	if c := p.Counts(); c.Ready != 0 || c.Cold != 10 {
		t.Errorf("counts %+v, want ready 0 and 10 cold", c)
	}
}
