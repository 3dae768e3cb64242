package web

import (
	"context"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"
)

// pageBuffer is how many events one open page may fall behind before it is dropped (its
// stream ends, and the browser reconnects and reads a fresh snapshot).
const pageBuffer = 256

// hub is the engine's one watcher on behalf of every open page: the engine hands each
// committed event to one channel however many pages are open, and the hub fans it out by
// run. So open pages cost the engine nothing per page.
type hub struct {
	orch Orch

	mu sync.Mutex
	// subs are the open pages by run id; guarded by mu.
	subs map[string]map[chan api.Event]struct{}
}

func newHub(o Orch) *hub {
	return &hub{orch: o, subs: map[string]map[chan api.Event]struct{}{}}
}

// subscribe returns run's events from now on, and a function to stop. The channel is closed
// when the page falls behind or the hub missed events.
func (h *hub) subscribe(run string) (<-chan api.Event, func()) {
	ch := make(chan api.Event, pageBuffer)
	h.mu.Lock()
	if h.subs[run] == nil {
		h.subs[run] = map[chan api.Event]struct{}{}
	}
	h.subs[run][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[run][ch]; ok {
			delete(h.subs[run], ch)
			if len(h.subs[run]) == 0 {
				delete(h.subs, run)
			}
			close(ch)
		}
	}
}

// run watches every run until ctx ends. When the engine drops the hub (it fell behind), every
// page is dropped too, since each may have missed an event, and the hub watches again.
func (h *hub) run(ctx context.Context) {
	for ctx.Err() == nil {
		events, stop := h.orch.Subscribe("*")
		h.forward(ctx, events)
		stop()
		h.dropAll()
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (h *hub) forward(ctx context.Context, events <-chan api.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			h.publish(ev)
		}
	}
}

func (h *hub) publish(ev api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[ev.Run] {
		select {
		case ch <- ev:
		default:
			delete(h.subs[ev.Run], ch)
			close(ch)
		}
	}
}

func (h *hub) dropAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for run, chans := range h.subs {
		for ch := range chans {
			close(ch)
		}
		delete(h.subs, run)
	}
}
