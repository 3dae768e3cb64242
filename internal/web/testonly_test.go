package web

import (
	"context"
	"net/netip"
)

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

// allowed reports whether one more wrong token from a would be within its budget.
func (l *loginLimiter) allowed(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.sources[prefixOf(a)]
	return b == nil || b.lim.TokensAt(l.now()) >= 1
}

func (l *loginLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sources)
}

// waiting is how many requests of client wait for a turn.
func (g *gate) waiting(client string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queues[client])
}

// RunHub feeds the open pages' event streams from the engine until ctx ends. [Server.Serve]
// runs it; a caller serving [Server.Handler] itself must run it too.
func (s *Server) RunHub(ctx context.Context) { s.hub.run(ctx) }
