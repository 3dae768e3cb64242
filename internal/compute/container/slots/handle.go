package slots

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// slotHandle is a claimed docker slot as its dispatch's handle: the container's end, then the
// session closed (what the worker streamed reached the dispatch's logs); killed at the
// dispatch's timeout, counted from the claim, or when the run's context ends.
type slotHandle struct {
	box     *container.Slot
	sess    *remote.Session
	release func() // the claim mark, let go once the container has ended
	once    sync.Once
	stop    func() bool

	mu        sync.Mutex
	timedOut  bool // guarded by mu
	cancelled bool // guarded by mu
}

func newSlotHandle(ctx context.Context, box *container.Slot, sess *remote.Session, timeout time.Duration, release func()) *slotHandle {
	h := &slotHandle{box: box, sess: sess, release: release}
	stopCtx := context.AfterFunc(ctx, func() { h.kill(false) })
	var t *time.Timer
	if timeout > 0 {
		t = time.AfterFunc(timeout, func() { h.kill(true) })
	}
	h.stop = func() bool {
		if t != nil {
			t.Stop()
		}
		return stopCtx()
	}
	return h
}

func (h *slotHandle) kill(timedOut bool) {
	h.mu.Lock()
	if timedOut {
		h.timedOut = true
	} else if !h.timedOut {
		h.cancelled = true
	}
	h.mu.Unlock()
	h.box.Discard()
}

func (h *slotHandle) TaskID() string { return h.box.Handle().TaskID() }

func (h *slotHandle) Wait() (compute.Exit, error) {
	exit, err := h.box.Handle().Wait()
	h.once.Do(func() {
		h.release()
		h.stop()
		if cerr := h.sess.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close the slot's gateway session: %w", cerr)
		}
	})
	h.mu.Lock()
	exit.TimedOut = exit.TimedOut || h.timedOut
	exit.Cancelled = exit.Cancelled || h.cancelled
	h.mu.Unlock()
	if exit.Code == remote.ExitGatewayUnreachable {
		exit.GatewayUnreachable = true
	}
	return exit, err
}
