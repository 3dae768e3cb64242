package orch

import "github.com/agora-dev/agora/internal/orch/api"

// watchBuffer is how many events a slow watcher may fall behind before it is dropped.
const watchBuffer = 1024

// Subscribe returns the events of run id ("*" for every run) as they commit, and a function
// to stop. The channel is closed when the watcher falls too far behind; it should then read
// the status again.
func (e *Engine) Subscribe(id string) (<-chan api.Event, func()) {
	ch := make(chan api.Event, watchBuffer)
	e.subMu.Lock()
	if e.subs[id] == nil {
		e.subs[id] = map[chan api.Event]struct{}{}
	}
	e.subs[id][ch] = struct{}{}
	e.subMu.Unlock()
	return ch, func() {
		e.subMu.Lock()
		defer e.subMu.Unlock()
		if _, ok := e.subs[id][ch]; ok {
			delete(e.subs[id], ch)
			close(ch)
		}
	}
}

// publish hands committed events to their run's watchers, never blocking the engine.
func (e *Engine) publish(events []api.Event) {
	e.subMu.Lock()
	defer e.subMu.Unlock()
	if len(e.subs) == 0 {
		return
	}
	for _, ev := range events {
		for _, key := range [2]string{ev.Run, "*"} {
			for ch := range e.subs[key] {
				select {
				case ch <- ev:
				default:
					delete(e.subs[key], ch)
					close(ch)
				}
			}
		}
	}
}
