package warm

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestPool_RefillOnTheClock runs the refill on a synctest clock: a failed fill is counted and
// retried retryPause later, never busy-looped; a ready slot that dies with no holder to say so
// is found at the pool's next look (lookEvery) and filled again; one a holder prunes is filled
// again within retryPause of the prune, not at once.
func TestPool_RefillOnTheClock(t *testing.T) {
	t.Run("failed-fills", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var mu sync.Mutex
			var at []time.Duration
			p := New(t.Context(), "local", 1, func(context.Context) (Slot, error) {
				mu.Lock()
				defer mu.Unlock()
				at = append(at, time.Since(start))
				if len(at) <= 3 {
					return nil, errors.New("no room")
				}
				return &fakeSlot{shape: "s"}, nil
			})
			defer p.Close()
			time.Sleep(time.Minute)
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			if want := []time.Duration{0, retryPause, 2 * retryPause, 3 * retryPause}; !slices.Equal(at, want) {
				t.Errorf("fills at %v, want %v (each failure retried a pause later)", at, want)
			}
			if c := p.Counts(); c.Failed != 3 || c.Ready != 1 {
				t.Errorf("counts %+v, want 3 failed, 1 ready", c)
			}
		})
	})
	for _, pruned := range []bool{false, true} {
		name := map[bool]string{false: "dies-unwatched", true: "pruned"}[pruned]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var made []*liveSlot
				var at []time.Time
				p := New(t.Context(), "local", 1, func(context.Context) (Slot, error) {
					s := &liveSlot{fakeSlot: fakeSlot{shape: "s"}}
					mu.Lock()
					defer mu.Unlock()
					made, at = append(made, s), append(at, time.Now())
					return s, nil
				})
				defer p.Close()
				// Off the pool's looks: the first is lookEvery after its fill.
				time.Sleep(lookEvery / 2)
				synctest.Wait()
				mu.Lock()
				made[0].dead.Store(true)
				mu.Unlock()
				died := time.Now()
				if pruned {
					p.Prune()
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if len(at) != 2 {
					t.Fatalf("%d fills (at %v), want the first and one refill", len(at), at)
				}
				// Unwatched, the pool's look after the death finds it; pruned, the refill
				// comes at that look or retryPause after the prune, whichever is first, and
				// never at once (a slot that dies as soon as it is ready is not restarted in
				// a loop).
				if look := at[0].Add(lookEvery); !pruned && !at[1].Equal(look) {
					t.Errorf("refilled at %v, want at the pool's look at %v", at[1], look)
				} else if pruned && (!at[1].After(died) || at[1].After(died.Add(retryPause))) {
					t.Errorf("refilled %s after the prune, want after it and within %s", at[1].Sub(died), retryPause)
				}
				if c := p.Counts(); c.Failed != 1 || c.Ready != 1 {
					t.Errorf("counts %+v, want the dead slot failed and one ready", c)
				}
				if made[0].discarded.Load() != 1 {
					t.Error("the dead slot was not discarded")
				}
			})
		})
	}
}
