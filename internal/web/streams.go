package web

import (
	"net/http"
	"sync"
)

// maxClientStreams bounds each client's open event streams. A stream holds its connection as
// long as its page is open, and the listener holds maxConns connections in all: without a
// bound per client, one token (a read-only one included) could open streams until no
// connection is left for anyone, the operator included. A person's tabs need far fewer; a
// page whose stream is refused still shows what it read, and a reload retries.
const maxClientStreams = 32

// streamCounts counts the open streams of each client, by name.
type streamCounts struct {
	mu sync.Mutex
	// open is guarded by mu.
	open map[string]int
}

// acquire takes one of client's streams; false when it has maxClientStreams open.
func (c *streamCounts) acquire(client string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open = map[string]int{}
	}
	if c.open[client] >= maxClientStreams {
		return false
	}
	c.open[client]++
	return true
}

func (c *streamCounts) release(client string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[client]--; c.open[client] <= 0 {
		delete(c.open, client)
	}
}

// streamed serves h, an event stream, when the request's client has a stream to spare, and
// otherwise answers 429 and closes the connection (kept idle, it would hold the place the
// refusal keeps free).
func (s *Server) streamed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := principalOf(r.Context()).name
		if !s.streams.acquire(name) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "5")
			s.refuse(w, r, http.StatusTooManyRequests, "too many live views open for "+name+": close some pages")
			return
		}
		defer s.streams.release(name)
		h(w, r)
	}
}
