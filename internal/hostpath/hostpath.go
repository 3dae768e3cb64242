// Package hostpath hides paths on the serving host from people and programs that may not see
// them: a read-only viewer of the web run view and every MCP client. A [Mask] knows the
// paths of the thing shown (a run's or dispatch's repository, AGORA_HOME) and replaces them
// wherever they occur, in any text, agent-written text included (an agent can learn its
// repository's path from git); text the host wrote about what happened (a failure's reason
// and detail, an audit entry) also loses every absolute path of two or more components,
// known or not, since such text names host paths it never declared ("repository
// /tmp/x/private-repo is not a directory").
//
// It is a leaf: it imports only the standard library and holds no state beyond a Mask.
package hostpath

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Hidden is what a hidden path reads as.
const Hidden = "(host path hidden)"

// Mask replaces host paths in text. The zero Mask and a nil *Mask hide nothing known but
// still hide unknown paths in host-written text ([Mask.HostText]).
type Mask struct {
	// known are the paths to replace anywhere, longest first (so a path inside another is
	// not replaced first and leave the rest of the longer one).
	known []string
}

// New returns a Mask of the known paths (empty ones, and "/" alone, are ignored).
func New(known ...string) *Mask {
	m := &Mask{}
	m.Add(known...)
	return m
}

// Add adds known paths. A path is also known without its trailing slashes.
func (m *Mask) Add(known ...string) {
	for _, p := range known {
		p = strings.TrimRight(p, "/")
		if p == "" || slices.Contains(m.known, p) {
			continue
		}
		m.known = append(m.known, p)
	}
	slices.SortStableFunc(m.known, func(a, b string) int { return len(b) - len(a) })
}

// Tail returns the end of s from its last n bytes, with the known paths hidden. Where the cut
// would split a known path, it moves back to the path's start: the part left over (its last
// components, a project's name) is no longer a path the mask knows, so it is hidden whole
// rather than its end shown. The text returned is at most n bytes plus the longest known
// path before masking.
func (m *Mask) Tail(s string, n int) string {
	p := max(len(s)-n, 0)
	for moved := m != nil; moved && p > 0; {
		moved = false
		for _, k := range m.known {
			// Any occurrence inside this window starts before p and ends after it.
			lo, hi := max(p-len(k)+1, 0), min(p+len(k)-1, len(s))
			if lo < hi {
				if i := strings.Index(s[lo:hi], k); i >= 0 {
					p, moved = lo+i, true
				}
			}
		}
	}
	return m.Text(s[p:])
}

// Head returns the start of s up to its first n bytes, with the known paths hidden; where the
// cut would split a known path it moves on to the path's end, as [Mask.Tail] moves back.
func (m *Mask) Head(s string, n int) string {
	q := min(n, len(s))
	for moved := m != nil; moved && q < len(s); {
		moved = false
		for _, k := range m.known {
			lo, hi := max(q-len(k)+1, 0), min(q+len(k)-1, len(s))
			if lo < hi {
				if i := strings.LastIndex(s[lo:hi], k); i >= 0 {
					q, moved = lo+i+len(k), true
				}
			}
		}
	}
	return m.Text(s[:q])
}

// Text returns s with every known path replaced by [Hidden]: for any text, including what an
// agent wrote. A known path is replaced only as a whole path: not where it is the start of a
// longer name ("/src/app" in "/src/apple"), but with anything below it ("/src/app/x").
func (m *Mask) Text(s string) string {
	if m == nil {
		return s
	}
	for _, p := range m.known {
		if strings.Contains(s, p) {
			s = replaceWhole(s, p)
		}
	}
	return s
}

// HostText returns s with the known paths and every other absolute path of at least two
// components (or a home-relative one, ~/x/y) replaced by [Hidden]: for text the host wrote.
func (m *Mask) HostText(s string) string {
	s = m.Text(s)
	if !strings.Contains(s, "/") {
		return s
	}
	return anyPath().ReplaceAllString(s, "${1}"+Hidden)
}

// replaceWhole replaces p in s where it is a whole path or the start of a path below it.
func replaceWhole(s, p string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, p)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(p)
		if end < len(s) && pathByte(s[end]) && s[end] != '/' {
			// Another name ("/srv/app" in "/srv/apple"); a whole occurrence may still start
			// inside this one ("/ab/a" in "/ab/ab/a"), so look again one byte on.
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		// Take what lies below the path with it: "/src/app/x" hides "x" too.
		for end < len(s) && pathByte(s[end]) {
			end++
		}
		b.WriteString(s[:i])
		b.WriteString(Hidden)
		s = s[end:]
	}
}

// pathByte reports whether c may continue a path in running text.
func pathByte(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', ',', ';', '|', ':', '=':
		return false
	}
	return c >= 0x20 && c != 0x7f
}

// anyPath matches an absolute path of at least two components, or a home-relative one, where
// a path may start: the text's start, after a space, quote, bracket, '=', ':' or ',', or
// after file://. A path's first component does not start with a slash, so the host of a URL
// (http://example.com/a) is not taken for one. Group 1 is what comes before the path.
var anyPath = sync.OnceValue(func() *regexp.Regexp {
	const stop = `\s"'` + "`" + `()\[\]{}<>,;:|`
	return regexp.MustCompile(`(^|[\s"'` + "`" + `(\[{<=:,]|file://)~?/[^/` + stop + `][^` + stop + `]*/[^` + stop + `]*`)
})
