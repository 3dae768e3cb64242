package verdict

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Protect globs have doublestar semantics over repository-relative paths, '/' separated:
//
//   - "*" matches any run of characters within one path segment (a leading dot included:
//     "*_test.go" matches ".x_test.go"), "?" one character, "[abc]", "[a-z]", "[!a-z]" (or
//     "[^a-z]") one character of (or not of) a class; "\" escapes the next character.
//   - "**" as a whole segment matches zero or more segments: "**/*_test.go" matches
//     "a_test.go" and "x/y/a_test.go"; ".github/**" matches ".github" itself and everything
//     below it (so replacing the directory by a file or a link is caught too).
//   - "{a,b}" matches either alternative (nested braces too), at most [maxAlternatives]
//     patterns in all after expansion.
//
// A pattern is relative and clean: no leading or trailing '/', no empty, "." or ".."
// segment, and "**" only as a whole segment. Matching is case-sensitive, byte for byte, and
// linear in the path for each expanded pattern (no backtracking blow-up).

// maxAlternatives caps the patterns one protect glob expands to through its braces.
const maxAlternatives = 256

// Matcher matches paths against a set of protect globs.
type Matcher struct {
	patterns [][]string // expanded patterns, as segments; "**" is its own segment
	sources  []int      // for each expanded pattern, the index of the glob it came from
	globs    []string
}

// NewMatcher compiles globs; an invalid one is an error naming it.
func NewMatcher(globs []string) (*Matcher, error) {
	m := &Matcher{globs: globs}
	for i, g := range globs {
		segs, err := compile(g)
		if err != nil {
			return nil, fmt.Errorf("protect glob %q: %w", g, err)
		}
		for _, s := range segs {
			m.patterns = append(m.patterns, s)
			m.sources = append(m.sources, i)
		}
	}
	return m, nil
}

// Match returns the first glob that matches path, and whether one does.
func (m *Matcher) Match(path string) (string, bool) {
	segs := strings.Split(path, "/")
	for i, p := range m.patterns {
		if matchSegments(p, segs) {
			return m.globs[m.sources[i]], true
		}
	}
	return "", false
}

// CheckPattern says why p is not a protect glob, or nil.
func CheckPattern(p string) error {
	_, err := compile(p)
	return err
}

// compile checks p and expands it into patterns of segments.
func compile(p string) ([][]string, error) {
	switch {
	case p == "":
		return nil, errors.New("empty pattern")
	case len(p) > MaxPatternBytes:
		return nil, fmt.Errorf("%d bytes; at most %d", len(p), MaxPatternBytes)
	case !utf8.ValidString(p):
		return nil, errors.New("not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return nil, errors.New("holds a NUL byte")
	}
	alts, err := expand(p, 0)
	if err != nil {
		return nil, err
	}
	out := make([][]string, 0, len(alts))
	for _, a := range alts {
		segs, err := segments(a)
		if err != nil {
			if a != p {
				return nil, fmt.Errorf("alternative %q: %w", a, err)
			}
			return nil, err
		}
		out = append(out, segs)
	}
	return out, nil
}

// segments splits one brace-free pattern into checked segments, folding "**/**" into "**".
func segments(p string) ([]string, error) {
	if strings.HasPrefix(p, "/") {
		return nil, errors.New("starts with '/'; paths are relative to the repository")
	}
	var out []string
	for _, s := range strings.Split(p, "/") {
		switch {
		case s == "":
			return nil, errors.New("has an empty segment ('//' or a trailing '/')")
		case s == "." || s == "..":
			return nil, fmt.Errorf("has a %q segment; write the path clean", s)
		case s == "**":
			if len(out) > 0 && out[len(out)-1] == "**" {
				continue
			}
		case strings.Contains(unescaped(s), "**"):
			return nil, fmt.Errorf("segment %q: ** must be a whole segment (a/**/b), or use * within a segment", s)
		default:
			if err := checkSegment(s); err != nil {
				return nil, fmt.Errorf("segment %q: %w", s, err)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// unescaped is s with each escaped character replaced by a neutral one, for the "**" check.
func unescaped(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			b[i], b[i+1] = 'x', 'x'
			i++
		}
	}
	return string(b)
}

// checkSegment checks escapes and classes of one segment.
func checkSegment(s string) error {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) {
				return errors.New("ends with an unescaped '\\'")
			}
			i++
		case '[':
			n, err := classLen(s[i:])
			if err != nil {
				return err
			}
			i += n - 1
		}
	}
	return nil
}

// classLen is the length of the class at the start of p ("[...]"), or why it is malformed.
func classLen(p string) (int, error) {
	i := 1
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		i++
	}
	first := true
	for ; i < len(p); i++ {
		c := p[i]
		switch {
		case c == ']' && !first:
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(p) {
				return 0, errors.New("a class ends with an unescaped '\\'")
			}
			i++
		}
		first = false
	}
	return 0, errors.New("a '[' class is not closed by ']'")
}

// expand returns p with its braces expanded, depth-first, at most maxAlternatives results.
func expand(p string, depth int) ([]string, error) {
	open, close, err := firstBraces(p)
	if err != nil {
		return nil, err
	}
	if open < 0 {
		return []string{p}, nil
	}
	if depth > 16 {
		return nil, errors.New("braces nested too deep")
	}
	var out []string
	for _, alt := range splitAlternatives(p[open+1 : close]) {
		more, err := expand(p[:open]+alt+p[close+1:], depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
		if len(out) > maxAlternatives {
			return nil, fmt.Errorf("braces expand to more than %d patterns", maxAlternatives)
		}
	}
	return out, nil
}

// firstBraces finds the first unescaped '{' outside a class and its matching '}'; -1 when
// there is none.
func firstBraces(p string) (int, int, error) {
	open, depth := -1, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			if n, err := classLen(p[i:]); err == nil {
				i += n - 1
			}
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				return 0, 0, errors.New("a '}' closes no '{'")
			}
			depth--
			if depth == 0 {
				return open, i, nil
			}
		}
	}
	if depth > 0 {
		return 0, 0, errors.New("a '{' is not closed by '}'")
	}
	return -1, -1, nil
}

// splitAlternatives splits the inside of braces at its top-level commas.
func splitAlternatives(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			if n, err := classLen(s[i:]); err == nil {
				i += n - 1
			}
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// matchSegments matches path segments against pattern segments ("**": zero or more of them)
// by dynamic programming over (pattern, path) positions: O(len(p)*len(s)) segment matches.
func matchSegments(p, s []string) bool {
	// next[j]: p[i+1:] matches s[j:]; cur[j]: p[i:] matches s[j:].
	next := make([]bool, len(s)+1)
	cur := make([]bool, len(s)+1)
	next[len(s)] = true
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == "**" {
			cur[len(s)] = next[len(s)]
			for j := len(s) - 1; j >= 0; j-- {
				cur[j] = next[j] || cur[j+1]
			}
		} else {
			cur[len(s)] = false
			for j := len(s) - 1; j >= 0; j-- {
				cur[j] = next[j+1] && matchSegment(p[i], s[j])
			}
		}
		next, cur = cur, next
	}
	return next[0]
}

// matchSegment matches one segment of a checked pattern against one path segment. A '*'
// is retried one character further on a mismatch (the last star only): linear backtracking.
func matchSegment(p, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0
	for px < len(p) || sx < len(s) {
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				starP, starS = px, sx
				px++
				continue
			case '?':
				if sx < len(s) {
					_, n := utf8.DecodeRuneInString(s[sx:])
					px, sx = px+1, sx+n
					continue
				}
			case '[':
				if sx < len(s) {
					r, n := utf8.DecodeRuneInString(s[sx:])
					plen, _ := classLen(p[px:])
					if plen > 0 && inClass(p[px:px+plen], r) {
						px, sx = px+plen, sx+n
						continue
					}
				}
			case '\\':
				if px+1 < len(p) && sx < len(s) && s[sx] == p[px+1] {
					px, sx = px+2, sx+1
					continue
				}
			default:
				if sx < len(s) && s[sx] == c {
					px, sx = px+1, sx+1
					continue
				}
			}
		}
		if starP >= 0 && starS < len(s) {
			_, n := utf8.DecodeRuneInString(s[starS:])
			starS += n
			px, sx = starP+1, starS
			continue
		}
		return false
	}
	return true
}

// inClass reports whether r is in the class c ("[...]", checked).
func inClass(c string, r rune) bool {
	body := c[1 : len(c)-1]
	negate := false
	if len(body) > 0 && (body[0] == '!' || body[0] == '^') {
		negate, body = true, body[1:]
	}
	in := false
	for len(body) > 0 {
		lo, n := classRune(body)
		body = body[n:]
		hi := lo
		if len(body) >= 2 && body[0] == '-' {
			hi, n = classRune(body[1:])
			body = body[1+n:]
		}
		if lo <= r && r <= hi {
			in = true
		}
	}
	return in != negate
}

// classRune decodes one (possibly escaped) character of a class body.
func classRune(s string) (rune, int) {
	if s[0] == '\\' && len(s) > 1 {
		r, n := utf8.DecodeRuneInString(s[1:])
		return r, n + 1
	}
	return utf8.DecodeRuneInString(s)
}
