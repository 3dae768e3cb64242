package lease

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
)

// bubbleNow is a boot clock for a synctest bubble: the bubble's fake time, which moves only
// when every goroutine in it waits.
func bubbleNow() instant { return instant(time.Now().UnixNano()) }

// hangingLeases is memLeases behind an apiserver that can stop answering: once hung, every
// call waits until its context ends, as a call to a hung apiserver does until its timeout.
type hangingLeases struct {
	*memLeases
	mu      sync.Mutex
	hung    bool
	updates []time.Time // when each Create or Update that answered was made
}

func (h *hangingLeases) hang() { h.mu.Lock(); h.hung = true; h.mu.Unlock() }

func (h *hangingLeases) wait(ctx context.Context) error {
	h.mu.Lock()
	hung := h.hung
	h.mu.Unlock()
	if !hung {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingLeases) Get(ctx context.Context, name string) (*coordv1.Lease, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.memLeases.Get(ctx, name)
}

func (h *hangingLeases) Create(ctx context.Context, l *coordv1.Lease) (*coordv1.Lease, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	got, err := h.memLeases.Create(ctx, l)
	h.wrote(err)
	return got, err
}

func (h *hangingLeases) Update(ctx context.Context, l *coordv1.Lease) (*coordv1.Lease, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	got, err := h.memLeases.Update(ctx, l)
	h.wrote(err)
	return got, err
}

func (h *hangingLeases) wrote(err error) {
	if err == nil {
		h.mu.Lock()
		h.updates = append(h.updates, time.Now())
		h.mu.Unlock()
	}
}

func (h *hangingLeases) writes() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.updates...)
}

// TestElect_RenewsThenGivesUpWhenTheAPIHangs runs a leader on a fake clock: it renews its
// Lease every fifth of the duration, its fence open 4/5 of the duration past each renew; once
// the apiserver hangs, it gives the Lease up (Lost closed, fence shut) after 2/3 of the
// duration without a renew, not before, and before a standby could take the Lease over (a
// whole duration after the last renew).
func TestElect_RenewsThenGivesUpWhenTheAPIHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 10 * time.Second
		api := &hangingLeases{memLeases: &memLeases{}}
		start := time.Now()
		leader, err := elect(t.Context(), Config{Name: "leader", Namespace: "agora", Identity: "replica-a", Duration: d}, api, bubbleNow)
		if err != nil {
			t.Fatal(err)
		}
		defer leader.Release()
		time.Sleep(3*d/5 + time.Millisecond)
		synctest.Wait()
		var renews []time.Duration
		for _, at := range api.writes() {
			renews = append(renews, at.Sub(start))
		}
		if want := []time.Duration{0, d / 5, 2 * d / 5, 3 * d / 5}; !slices.Equal(renews, want) {
			t.Fatalf("the Lease was written at %v, want %v (created, then renewed every fifth of the duration)", renews, want)
		}
		if err := leader.Fence.Check(); err != nil {
			t.Fatalf("the fence of a leader that renews: %v", err)
		}

		api.hang()
		lastRenew := start.Add(3 * d / 5)
		select {
		case <-leader.Lost():
			t.Fatal("the leader gave up its Lease while it renewed")
		case <-time.After(2*d/3 - time.Millisecond):
		}
		if err := leader.Fence.Check(); err != nil {
			t.Fatalf("the fence closed before 4/5 of the duration past the last renew: %v", err)
		}
		select {
		case <-leader.Lost():
		case <-time.After(d / 3):
			t.Fatal("the leader kept its Lease a whole duration past its last renew: a standby may hold it by now")
		}
		if lost := time.Since(lastRenew); lost < 2*d/3 || lost >= d {
			t.Errorf("the leader gave up %s after its last renew, want at least 2/3 and under the whole of its %s duration", lost, d)
		}
		if err := leader.Fence.Check(); err == nil {
			t.Error("the fence is open after the loss")
		}
		if n := len(api.writes()); n != 4 {
			t.Errorf("%d writes of the Lease, want the 4 before the hang", n)
		}
	})
}
