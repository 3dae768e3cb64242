package mcpserver

import (
	"testing"
	"time"
)

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
