package mcphost

import (
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// endSignals keeps, for the dispatches this server started, the channel their supervisor
// closes at their end (detach.Supervisors.Launch), so the MCP server's poll of a waited-on
// dispatch reads its end at once (mcpserver.EndSignal). An entry is kept a while after its
// channel closes (a waiter that joins just after the end gets a closed channel and reads at
// once) and dropped after that; a dispatch not found here is polled as before.
type endSignals struct {
	mu     sync.Mutex
	byID   map[string]*endSignal // guarded by mu
	pruned time.Time             // guarded by mu; the last scan for closed signals
}

type endSignal struct {
	done   <-chan struct{}
	closed time.Time // when done was seen closed; zero while open
}

// endSignalKeep is how long a closed signal stays after its end.
const endSignalKeep = time.Minute

var _ mcpserver.EndSignal = (*Dispatcher)(nil)

// Ended implements mcpserver.EndSignal.
func (m *Dispatcher) Ended(id string) <-chan struct{} {
	m.ends.mu.Lock()
	defer m.ends.mu.Unlock()
	if e := m.ends.byID[id]; e != nil {
		return e.done
	}
	return nil
}

// track keeps done as id's end signal and drops those closed for longer than endSignalKeep.
func (c *endSignals) track(id string, done <-chan struct{}, now time.Time) {
	if done == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]*endSignal{}
	}
	// A scan at most every pruneEvery: a scan per track cost the square of the dispatch rate
	// (0.2 ms a call at 10,000 kept).
	if now.Sub(c.pruned) >= pruneEvery {
		c.prune(now)
	}
	c.byID[id] = &endSignal{done: done}
}

// pruneEvery is how often track looks for signals to drop.
const pruneEvery = time.Second

// prune marks the signals seen closed and drops those closed longer than endSignalKeep; c.mu
// is held.
func (c *endSignals) prune(now time.Time) {
	c.pruned = now
	for k, e := range c.byID {
		if e.closed.IsZero() {
			select {
			case <-e.done:
				e.closed = now
			default:
			}
		} else if now.Sub(e.closed) > endSignalKeep {
			delete(c.byID, k)
		}
	}
}
