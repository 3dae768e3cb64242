// Package warm keeps a target's warm slots: sandboxes a provider started ahead of any
// dispatch, each claimed by at most one dispatch and never reused. It is provider-neutral:
// a provider supplies a [Fill] that starts one slot (the local provider a blocked
// bubblewrap sandbox, a container provider a started worker) and the pool keeps N of them
// ready, refilling in the background, and counts what happened for doctor, metrics and the
// web view.
//
// The rules every provider relies on: [Pool.Claim] hands a slot to exactly one caller and
// removes it from the pool before it returns; a slot the pool discards (at Close, or when a
// claim's shape does not match and the slot is spoilt) is never handed out again; a failed
// fill is counted and retried after a pause, never busy-looped.
package warm

import (
	"context"
	"sync"
	"time"
)

// Slot is one started sandbox held for a dispatch.
type Slot interface {
	// Shape is what a dispatch's sandbox must match to run in this slot (runtime, binds,
	// network mode, limits): a provider-defined key compared for equality.
	Shape() string
	// Discard kills the slot and removes what it holds on the host. Called at most once,
	// only for a slot never claimed.
	Discard()
}

// aliver is what a slot whose sandbox can die while it waits (killed from outside, the OOM
// killer) implements: a dead slot is neither counted ready nor handed to a claim; it is
// discarded, counted failed, and refilled.
type aliver interface{ Alive() bool }

func alive(s Slot) bool {
	a, ok := s.(aliver)
	return !ok || a.Alive()
}

// settler is what a slot implements whose claim holds back the refill until the dispatch
// it runs has settled (a standby supervisor: its exit). A refill is a process start and a
// sandbox's (Go start, inits, agora.db, bwrap); begun at the claim, it runs beside the claimed
// dispatch on the same cores and slows it (a warm no-op through serve: 46-50 ms against
// 31-37 ms with the refill held back, measured in the same run).
type settler interface{ Settled() <-chan struct{} }

// refillHeldAtMost bounds how long a claimed slot holds back the refill: a long dispatch's
// pool is topped up this long after its claim. A burst of more than want claims within it
// finds the pool empty and starts cold, as it would while a refill ran.
var refillHeldAtMost = 250 * time.Millisecond

// Fill starts one slot. It is called from the pool's refill goroutine only.
type Fill func(ctx context.Context) (Slot, error)

// Counts are a pool's numbers, for doctor, metrics and the web view.
type Counts struct {
	Target string `json:"target"`
	// Want is the target's warm setting; Ready the slots started and waiting.
	Want  int `json:"want"`
	Ready int `json:"ready"`
	// Claimed counts slots handed to a dispatch; Cold dispatches that found no slot of
	// their shape (none ready, or another shape) and started cold; Failed fills that failed.
	Claimed uint64 `json:"claimed"`
	Cold    uint64 `json:"cold_fallback"`
	Failed  uint64 `json:"failed"`
}

// retryPause is how long the pool waits after a failed fill before the next one.
const retryPause = 2 * time.Second

// Pool keeps up to want slots ready. The zero value is not usable; use [New].
type Pool struct {
	target string
	want   int
	fill   Fill

	mu     sync.Mutex
	ready  []Slot // guarded by mu
	counts Counts // guarded by mu
	closed bool   // guarded by mu
	// flushes counts Flush calls (guarded by mu): a slot whose fill began before the latest
	// one has the shape Flush discarded, and is discarded when it lands rather than sitting
	// ready where no claim of the new shape takes it.
	flushes uint64

	kick   chan struct{} // a claim asks the refill loop to top up
	cancel context.CancelFunc
	done   chan struct{}
	// discarding counts the discards running in the background (dead slots, a Flush's, a
	// fill that landed after one): Close waits for them, so nothing of a slot outlives it.
	// Each is added under mu while the pool is open, so none is added once Close waits.
	discarding sync.WaitGroup
}

// discardLocked discards slots in the background, counted in p.discarding. p.mu is held.
func (p *Pool) discardLocked(slots []Slot) {
	if len(slots) == 0 {
		return
	}
	p.discarding.Add(1)
	go func() {
		defer p.discarding.Done()
		for _, s := range slots {
			s.Discard()
		}
	}()
}

// New starts a pool that keeps want slots of target ready, filling in the background until
// Close. want <= 0 gives a pool that never fills: every claim goes cold.
func New(ctx context.Context, target string, want int, fill Fill) *Pool {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Pool{target: target, want: max(want, 0), fill: fill, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	p.counts.Target, p.counts.Want = target, p.want
	go p.refill(ctx)
	return p
}

// refill tops the pool up to want, one slot at a time (each start costs the machine), until
// the pool is closed.
func (p *Pool) refill(ctx context.Context) {
	defer close(p.done)
	for {
		for p.missing() > 0 && ctx.Err() == nil {
			p.mu.Lock()
			gen := p.flushes
			p.mu.Unlock()
			s, err := p.fill(ctx)
			if err != nil {
				p.mu.Lock()
				p.counts.Failed++
				p.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(retryPause):
				}
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				s.Discard()
				return
			}
			if gen != p.flushes {
				p.discardLocked([]Slot{s}) // of the shape a Flush discarded while it started
				p.mu.Unlock()
				continue
			}
			p.ready = append(p.ready, s)
			p.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-time.After(lookEvery):
			// A ready slot can die while it waits (the OOM killer, a kill from outside);
			// a holder that watches its slots says so at once (Prune), but no slot may sit
			// dead in the pool, counted as ready, until a claim finds it: look now and then.
			p.dropDead()
		}
	}
}

// lookEvery is how often an idle pool looks for ready slots that died (a /proc read each).
const lookEvery = retryPause

func (p *Pool) missing() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	return p.want - len(p.ready)
}

// Claim takes a ready slot of this shape out of the pool, or returns nil (counted as a
// cold fallback). A slot is returned to one caller only and never again.
func (p *Pool) Claim(shape string) Slot {
	p.mu.Lock()
	var s Slot
	var dead []Slot
	keep := make([]Slot, 0, len(p.ready))
	for _, c := range p.ready {
		switch {
		case !alive(c):
			dead = append(dead, c)
			p.counts.Failed++
		case s == nil && c.Shape() == shape:
			s = c
		default:
			keep = append(keep, c)
		}
	}
	p.ready = keep
	if s == nil {
		p.counts.Cold++
	} else {
		p.counts.Claimed++
	}
	p.discardLocked(dead)
	p.mu.Unlock()
	if st, ok := s.(settler); ok && len(dead) == 0 {
		go p.kickWhenSettled(st.Settled())
	} else if s != nil || len(dead) > 0 {
		p.kickRefill()
	}
	return s
}

// kickRefill asks the refill loop to top up.
func (p *Pool) kickRefill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// kickWhenSettled asks for the refill once a claimed slot has settled, or refillHeldAtMost
// after its claim.
func (p *Pool) kickWhenSettled(settled <-chan struct{}) {
	t := time.NewTimer(refillHeldAtMost)
	defer t.Stop()
	select {
	case <-settled:
	case <-t.C:
	}
	p.kickRefill()
}

// Prune takes the ready slots whose sandbox died while they waited (killed from outside, the
// OOM killer) out of the pool, counts them failed, discards them and has the pool refill
// after retryPause: a holder calls it as soon as it learns a slot died, so the pool does not
// sit short until a claim finds the dead ones (and that dispatch starts cold). The pause
// keeps slots that die as soon as they are ready from being restarted in a loop.
func (p *Pool) Prune() {
	if p.dropDead() == 0 {
		return
	}
	time.AfterFunc(retryPause, func() {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	})
}

// dropDead takes the ready slots whose sandbox died out of the pool, counts them failed,
// discards them in the background and returns how many there were.
func (p *Pool) dropDead() int {
	p.mu.Lock()
	var dead []Slot
	keep := make([]Slot, 0, len(p.ready))
	for _, c := range p.ready {
		if alive(c) {
			keep = append(keep, c)
		} else {
			dead = append(dead, c)
			p.counts.Failed++
		}
	}
	p.ready = keep
	p.discardLocked(dead)
	p.mu.Unlock()
	return len(dead)
}

// Flush takes every ready slot out of the pool at once (their shape is no longer wanted),
// discards them in the background and has the pool fill afresh. Claimed slots are their
// dispatch's.
func (p *Pool) Flush() {
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.flushes++
	p.discardLocked(ready)
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Counts returns the pool's numbers now.
func (p *Pool) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.counts
	for _, s := range p.ready {
		if alive(s) {
			c.Ready++
		}
	}
	return c
}

// Close stops the refill, discards every slot still ready and waits for the discards
// running in the background. Slots already claimed are their dispatch's.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	p.cancel()
	<-p.done
	for _, s := range ready {
		s.Discard()
	}
	p.discarding.Wait()
}
