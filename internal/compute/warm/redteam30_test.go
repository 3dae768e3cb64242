package warm

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// liveSlot is a slot whose sandbox can die while it waits.
type liveSlot struct {
	fakeSlot
	dead atomic.Bool
}

func (s *liveSlot) Alive() bool { return !s.dead.Load() }

// TestRedTeam30_DeadSlotNeitherReadyNorClaimed (red team #30): a ready slot whose sandbox was
// killed while it waited must not be counted ready (doctor, metrics and the web view would
// say "warm 1/1 ready" of nothing) nor handed to a claim (the dispatch would run in nothing);
// it is counted failed and refilled.
func TestRedTeam30_DeadSlotNeitherReadyNorClaimed(t *testing.T) {
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
	waitReady(t, p, 1)
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
	deadline := time.Now().Add(5 * time.Second)
	for first.discarded.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the dead slot was never discarded")
		}
		time.Sleep(time.Millisecond)
	}
	waitReady(t, p, 1)
}

// TestRedTeam30_DyingSlotsDoNotSpin: every slot the fill makes is dead at once (a broken
// sandbox, a killer on the host). The pool must not spin refilling them: a fill per slot
// wanted, and one more per claim that finds them dead, never a loop of its own.
func TestRedTeam30_DyingSlotsDoNotSpin(t *testing.T) {
	var fills atomic.Int32
	p := New(t.Context(), "local", 4, func(context.Context) (Slot, error) {
		fills.Add(1)
		s := &liveSlot{fakeSlot: fakeSlot{shape: "s"}}
		s.dead.Store(true)
		return s, nil
	})
	defer p.Close()
	time.Sleep(300 * time.Millisecond)
	if n := fills.Load(); n > 4 {
		t.Fatalf("%d fills with no claim for a pool of 4 whose slots die at once: the refill spins", n)
	}
	for range 10 {
		if s := p.Claim("s"); s != nil {
			t.Fatal("a dead slot was claimed")
		}
		p.Counts()
	}
	time.Sleep(300 * time.Millisecond)
	if n := fills.Load(); n > 4+4*10 {
		t.Fatalf("%d fills after 10 claims: the refill spins", n)
	}
	if c := p.Counts(); c.Ready != 0 || c.Cold != 10 {
		t.Errorf("counts %+v, want ready 0 and 10 cold", c)
	}
}
