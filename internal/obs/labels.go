package obs

import "sync"

// maxLabelLen bounds one label value; a longer one is reported as "invalid".
const maxLabelLen = 64

// labels caps the distinct values one label may take: past max, new values are "other". A
// value outside [A-Za-z0-9._:@/-] (or empty, or too long) is "invalid" (empty is "none"),
// so a name chosen by a sandbox or a client cannot carry arbitrary bytes into a series.
type labels struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func newLabels(max int) *labels { return &labels{max: max, seen: map[string]bool{}} }

// of returns the label value to use for v.
func (l *labels) of(v string) string {
	if v == "" {
		return "none"
	}
	if !validLabel(v) {
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

func validLabel(v string) bool {
	if len(v) > maxLabelLen {
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

// nameOf cuts a versioned catalog reference (name@sha256:HEX) to its name.
func nameOf(ref string) string {
	for i := 0; i < len(ref); i++ {
		if ref[i] == '@' {
			return ref[:i]
		}
	}
	return ref
}
