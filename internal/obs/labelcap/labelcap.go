// Package labelcap keeps a metric label's values few and plain: a name a sandbox or a client
// chose is the label value only when it is short and of [A-Za-z0-9._:@/-], and a label takes
// at most a fixed number of distinct values. It runs on the host, imports only the standard
// library, and lives apart from obs (which links the Prometheus client and the OpenTelemetry
// exporters) so its fuzz target builds without obs's import graph.
package labelcap

import "sync"

// MaxLen bounds one label value; a longer one is reported as "invalid".
const MaxLen = 64

// Set caps the distinct values one label may take: past max, new values are "other". A value
// outside [A-Za-z0-9._:@/-] (or too long) is "invalid" and the empty one "none", so a name
// chosen by a sandbox or a client cannot carry arbitrary bytes into a series. It is safe for
// concurrent use.
type Set struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool // guarded by mu
}

// New returns a Set that takes at most max distinct values.
func New(max int) *Set { return &Set{max: max, seen: map[string]bool{}} }

// Of returns the label value to use for v.
func (l *Set) Of(v string) string {
	if v == "" {
		return "none"
	}
	if !Valid(v) {
		return "invalid"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[v] {
		return v
	}
	if len(l.seen) >= l.max {
		return "other"
	}
	l.seen[v] = true
	return v
}

// Valid reports whether v may be a label value as it is: at most [MaxLen] bytes of
// [A-Za-z0-9._:@/-].
func Valid(v string) bool {
	if len(v) > MaxLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.' || c == '_' || c == '-' || c == ':' || c == '@' || c == '/':
		default:
			return false
		}
	}
	return true
}
