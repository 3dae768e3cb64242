package mcpserver

import (
	"testing"
	"time"
)

// PollMaxForTest is the shared poll's longest interval: a test on a fake clock waits a few
// of them to see the poll read, or not.
const PollMaxForTest = pollMax

// WaitersForTest is how many callers wait on dispatch id's shared poll (0: it has none, and
// its poll was told to stop).
func WaitersForTest(s *Server, id string) int {
	s.feeds.mu.Lock()
	defer s.feeds.mu.Unlock()
	if f := s.feeds.by[id]; f != nil {
		return f.waiters
	}
	return 0
}

// SetPollForTest sets the shared poll's intervals until t ends.
func SetPollForTest(t *testing.T, min, max time.Duration) {
	pollTest.Store(&[2]time.Duration{min, max})
	t.Cleanup(func() { pollTest.Store(nil) })
}

// ResourceRefForTest is a parsed resource URI.
type ResourceRefForTest struct{ Kind, ID, Name string }

// ParseResourceURIForTest exposes parseResourceURI.
func ParseResourceURIForTest(uri string) (ResourceRefForTest, error) {
	r, err := parseResourceURI(uri)
	return ResourceRefForTest{r.kind, r.id, r.name}, err
}

// DiffstatForTest exposes diffstat.
func DiffstatForTest(b []byte) Diffstat { return diffstat(b) }

// CutTextForTest exposes cutText.
func CutTextForTest(b []byte, n int) (string, bool) { return cutText(b, n) }

// TailTextForTest exposes tailText.
func TailTextForTest(b []byte, n int) string { return tailText(b, n) }

// EscapeNameForTest exposes escapeName.
func EscapeNameForTest(name string) string { return escapeName(name) }

// CleanClientNameForTest exposes the stdio client-name cleaner.
func CleanClientNameForTest(name string) string { return cleanClientName(name) }

// RegisteredToolsForTest is every tool the server registers (the table [Server] adds to each
// MCP server it makes), by name, with the ceiling tier it needs.
func RegisteredToolsForTest() map[string]string {
	out := map[string]string{}
	for _, t := range tools() {
		out[t.name] = t.tier.String()
	}
	return out
}

// PublishedSchemasForTest are the tools' input schemas as tools/list publishes them, by name.
func PublishedSchemasForTest() map[string][]byte {
	out := map[string][]byte{}
	for _, t := range tools() {
		out[t.name] = t.schema
	}
	return out
}
