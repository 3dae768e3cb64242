package warm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

type fakeSlot struct {
	id        int
	shape     string
	discarded atomic.Int32
}

func (s *fakeSlot) Shape() string { return s.shape }
func (s *fakeSlot) Discard()      { s.discarded.Add(1) }

// The pool's tests run in synctest bubbles: its refill pauses, looks and held-back refills
// run on the bubble's fake clock, which moves only when every goroutine of the pool waits, so
// a test says exactly what happened by when (nothing before a pause ends, all of it after).

// settled waits until the pool's goroutines all wait (on a kick, a pause or a look), and
// fails unless it holds n ready slots then.
func settled(t *testing.T, p *Pool, n int) {
	t.Helper()
	synctest.Wait()
	if c := p.Counts(); c.Ready != n {
		t.Fatalf("the pool settled with %d ready slots, want %d: %+v", c.Ready, n, c)
	}
}

// TestPool_ConcurrentClaimsNeverShare: 200 claims at once against a pool refilling 16
// slots: every claim gets a distinct slot or nil (cold), and the counts add up.
func TestPool_ConcurrentClaimsNeverShare(t *testing.T) {
	synctest.Test(t, testPoolConcurrentClaimsNeverShare)
}

func testPoolConcurrentClaimsNeverShare(t *testing.T) {
	var next atomic.Int64
	var mu sync.Mutex
	all := map[*fakeSlot]bool{}
	p := New(t.Context(), "local", 16, func(context.Context) (Slot, error) {
		s := &fakeSlot{id: int(next.Add(1)), shape: "s"}
		mu.Lock()
		all[s] = true
		mu.Unlock()
		return s, nil
	})
	settled(t, p, 16)
	var wg sync.WaitGroup
	got := make(chan Slot, 200)
	for range 200 {
		wg.Go(func() { got <- p.Claim("s") })
	}
	wg.Wait()
	close(got)
	seen := map[Slot]bool{}
	claimed := 0
	for s := range got {
		if s == nil {
			continue
		}
		if seen[s] {
			t.Fatalf("slot %d handed out twice", s.(*fakeSlot).id)
		}
		seen[s] = true
		claimed++
	}
	c := p.Counts()
	if claimed < 16 || int(c.Claimed) != claimed || int(c.Cold) != 200-claimed {
		t.Fatalf("claimed %d, counts %+v", claimed, c)
	}
	p.Close()
	for s := range seen {
		if s.(*fakeSlot).discarded.Load() != 0 {
			t.Fatalf("claimed slot %d was discarded by the pool", s.(*fakeSlot).id)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range all {
		if !seen[s] && s.discarded.Load() != 1 {
			t.Fatalf("unclaimed slot %d discarded %d times at Close, want 1", s.id, s.discarded.Load())
		}
	}
}

// TestPool_ShapeMismatchGoesCold: a claim of another shape gets nothing and is counted
// cold; the ready slot stays for its own shape.
func TestPool_ShapeMismatchGoesCold(t *testing.T) { synctest.Test(t, testPoolShapeMismatchGoesCold) }

func testPoolShapeMismatchGoesCold(t *testing.T) {
	p := New(t.Context(), "local", 1, func(context.Context) (Slot, error) { return &fakeSlot{shape: "a"}, nil })
	defer p.Close()
	settled(t, p, 1)
	if s := p.Claim("b"); s != nil {
		t.Fatal("a slot of shape a was claimed for shape b")
	}
	if c := p.Counts(); c.Cold != 1 || c.Claimed != 0 || c.Ready != 1 {
		t.Fatalf("counts %+v, want cold 1 claimed 0 ready 1", c)
	}
	if s := p.Claim("a"); s == nil {
		t.Fatal("the matching claim found no slot")
	}
}

// TestPool_FailedFillCounted: fills that fail are counted and retried after retryPause, never
// in a loop, and never claimed.
func TestPool_FailedFillCounted(t *testing.T) { synctest.Test(t, testPoolFailedFillCounted) }

func testPoolFailedFillCounted(t *testing.T) {
	var fills atomic.Int32
	p := New(t.Context(), "local", 2, func(ctx context.Context) (Slot, error) {
		if fills.Add(1) > 100 {
			<-ctx.Done() // a retry loop without its pause: hold it, and the count tells
		}
		return nil, errors.New("no bwrap")
	})
	defer p.Close()
	settled(t, p, 0)
	if c := p.Counts(); c.Failed != 1 || fills.Load() != 1 {
		t.Fatalf("counts %+v after %d fills, want the one failed fill counted and no retry before the pause", c, fills.Load())
	}
	time.Sleep(retryPause)
	settled(t, p, 0)
	if c := p.Counts(); c.Failed != 2 || fills.Load() != 2 {
		t.Fatalf("counts %+v after %d fills, want one retry after the pause", c, fills.Load())
	}
	if p.Claim("") != nil {
		t.Fatal("claim returned a slot from a pool whose fills all failed")
	}
}

// TestPool_ZeroKeepsNone: warm 0 never fills, at its start or at its looks.
func TestPool_ZeroKeepsNone(t *testing.T) { synctest.Test(t, testPoolZeroKeepsNone) }

func testPoolZeroKeepsNone(t *testing.T) {
	var fills atomic.Int32
	p := New(t.Context(), "local", 0, func(context.Context) (Slot, error) { fills.Add(1); return &fakeSlot{}, nil })
	settled(t, p, 0)
	time.Sleep(3 * lookEvery)
	synctest.Wait()
	p.Close()
	if fills.Load() != 0 {
		t.Fatalf("warm 0 filled %d slots", fills.Load())
	}
}

// TestPool_FlushRefills: Flush discards the ready slots once each and the pool fills afresh
// (with what the fill makes now: a new shape).
func TestPool_FlushRefills(t *testing.T) { synctest.Test(t, testPoolFlushRefills) }

func testPoolFlushRefills(t *testing.T) {
	var shape atomic.Value
	shape.Store("old")
	var made []*fakeSlot
	var mu sync.Mutex
	p := New(t.Context(), "local", 2, func(context.Context) (Slot, error) {
		s := &fakeSlot{shape: shape.Load().(string)}
		mu.Lock()
		made = append(made, s)
		mu.Unlock()
		return s, nil
	})
	defer p.Close()
	settled(t, p, 2)
	shape.Store("new")
	p.Flush()
	settled(t, p, 2)
	if s := p.Claim("new"); s == nil {
		t.Fatal("no slot of the new shape after Flush")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range made[:2] {
		if s.shape != "old" || s.discarded.Load() != 1 {
			t.Fatalf("old slot: shape %s discarded %d times, want old and 1", s.shape, s.discarded.Load())
		}
	}
}

// TestPool_FillOverlappingFlushIsDiscarded: a slot whose fill began before a Flush (made with
// the shape the Flush discarded) lands after it and is discarded, never counted ready: the pool
// then holds only slots of the new shape, so a claim of the new shape after the pool settles
// finds one (a stale slot counted ready had a test see a ready pool and its claim go cold).
func TestPool_FillOverlappingFlushIsDiscarded(t *testing.T) {
	synctest.Test(t, testPoolFillOverlappingFlush)
}

func testPoolFillOverlappingFlush(t *testing.T) {
	var shape atomic.Value
	shape.Store("old")
	started, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	var stale *fakeSlot
	p := New(t.Context(), "local", 1, func(ctx context.Context) (Slot, error) {
		s := &fakeSlot{shape: shape.Load().(string)}
		if first.CompareAndSwap(false, true) {
			stale = s
			close(started)
			<-release // the fill is under way, with the old shape, while the Flush comes
		}
		return s, nil
	})
	defer p.Close()
	<-started
	shape.Store("new")
	p.Flush()
	close(release)
	settled(t, p, 1)
	if stale.discarded.Load() != 1 {
		t.Fatalf("the slot filled across the Flush was discarded %d times, want 1", stale.discarded.Load())
	}
	if s := p.Claim("new"); s == nil {
		t.Fatalf("no slot of the new shape once the pool settled: %+v", p.Counts())
	}
}

// settlingSlot is a slot that holds back its pool's refill until settled closes.
type settlingSlot struct {
	fakeSlot
	settled chan struct{}
}

func (s *settlingSlot) Settled() <-chan struct{} { return s.settled }

// TestPool_RefillWaitsForTheClaimedSlotToSettle: a claimed slot that settles later (a standby
// supervisor, until its dispatch has ended) holds the refill back until it settles (the
// refill's process start would run beside the claimed dispatch), and not longer than
// refillHeldAtMost. On a synctest clock: the refill comes the moment the slot settles, or
// exactly refillHeldAtMost after the claim of one that never does.
func TestPool_RefillWaitsForTheClaimedSlotToSettle(t *testing.T) {
	synctest.Test(t, testPoolRefillWaitsForTheClaimedSlotToSettle)
}

func testPoolRefillWaitsForTheClaimedSlotToSettle(t *testing.T) {
	fills := make(chan *settlingSlot, 8)
	p := New(t.Context(), "local", 1, func(context.Context) (Slot, error) {
		s := &settlingSlot{fakeSlot: fakeSlot{shape: "s"}, settled: make(chan struct{})}
		fills <- s
		return s, nil
	})
	defer p.Close()
	first := <-fills
	settled(t, p, 1)
	if got := p.Claim("s"); got != first {
		t.Fatalf("claimed %v, want the ready slot", got)
	}
	time.Sleep(refillHeldAtMost / 2)
	synctest.Wait()
	select {
	case <-fills:
		t.Fatal("the pool refilled before the claimed slot settled")
	default:
	}
	close(first.settled)
	synctest.Wait() // no time passes: the refill follows the settling at once
	var second *settlingSlot
	select {
	case second = <-fills:
	default:
		t.Fatal("the pool did not refill after the claimed slot settled")
	}
	settled(t, p, 1)
	// Unsettled for good: the bound tops the pool up all the same, and not before it.
	if got := p.Claim("s"); got != second {
		t.Fatalf("claimed %v, want the refilled slot", got)
	}
	time.Sleep(refillHeldAtMost - time.Millisecond)
	synctest.Wait()
	select {
	case <-fills:
		t.Fatal("the pool refilled before refillHeldAtMost while the claimed slot had not settled")
	default:
	}
	time.Sleep(time.Millisecond)
	synctest.Wait()
	select {
	case <-fills:
	default:
		t.Fatal("a claimed slot that never settles held the refill back past refillHeldAtMost")
	}
}

// slowSlot's Discard waits for release: a slot whose teardown (an unmount, a container's
// removal) takes a while.
type slowSlot struct {
	fakeSlot
	release <-chan struct{}
}

func (s *slowSlot) Discard() { <-s.release; s.discarded.Add(1) }

// TestPool_CloseWaitsForBackgroundDiscards: Close returns only when the discards it did not
// start itself (a Flush's, here) have ended, so nothing of a slot (its directory, its mount)
// outlives the pool. On a synctest clock: while the Flush's discard waits, Close waits too.
func TestPool_CloseWaitsForBackgroundDiscards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var slots []*slowSlot
		p := New(t.Context(), "local", 1, func(ctx context.Context) (Slot, error) {
			s := &slowSlot{fakeSlot: fakeSlot{shape: "a"}, release: release}
			slots = append(slots, s)
			return s, nil
		})
		settled(t, p, 1)
		p.Flush()
		closed := make(chan struct{})
		go func() { p.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatalf("Close returned while the Flush's discard still ran")
		default:
		}
		close(release)
		<-closed
		for i, s := range slots {
			if s.discarded.Load() != 1 {
				t.Errorf("slot %d discarded %d times by the time Close returned, want 1", i, s.discarded.Load())
			}
		}
	})
}
