package mcphost

import (
	"sync"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// endedRecords keeps the last records seen in a final state. A final record never changes
// again (exactly one terminal state is recorded, nothing is added after it, and only
// needs_input, which is not kept here, moves on to answered), so an orchestrator re-reading a
// finished dispatch costs no database read.
type endedRecords struct {
	mu    sync.Mutex
	byID  map[string]*mcpserver.Record // guarded by mu
	order []string                     // guarded by mu; oldest first
}

const maxEndedRecords = 4096

func (c *endedRecords) get(id string) *mcpserver.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

func (c *endedRecords) put(r *mcpserver.Record) *mcpserver.Record {
	if !r.Final() {
		// Live, or waiting for an answer that will move it to answered.
		return r
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[string]*mcpserver.Record{}
	}
	if _, ok := c.byID[r.ID]; !ok {
		if len(c.order) == maxEndedRecords {
			delete(c.byID, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, r.ID)
	}
	c.byID[r.ID] = r
	return r
}
