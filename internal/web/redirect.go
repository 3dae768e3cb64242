package web

import (
	"net/url"
	"strings"
)

// maxNextLen bounds a kept redirect target: a page's own address is far shorter.
const maxNextLen = 2048

// localPath returns the redirect target after login for p when p is a path on this server
// however a browser reads it, and "" otherwise (the caller then goes to "/"). A browser
// removes TAB, CR and LF anywhere in a URL, reads a backslash as a slash and a leading "//"
// as a host, so "/\t/evil.example" and "/\\evil.example" leave the origin; intermediaries may
// also decode percent-encodings once more. So p is refused unless it and every decoding of it
// is plain printable ASCII with no backslash, starting with exactly one slash; what is kept is
// re-encoded from its parsed path and query (never a fragment), and written as the Location
// as it is.
func localPath(p string) string {
	if p == "" || len(p) > maxNextLen {
		return ""
	}
	for s, i := p, 0; ; i++ {
		if !plainPath(s, i == 0) {
			return ""
		}
		d, err := url.PathUnescape(s)
		if err != nil || i == 3 {
			return ""
		}
		if d == s {
			break
		}
		s = d
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Opaque != "" || u.User != nil || u.Host != "" {
		return ""
	}
	out := u.EscapedPath()
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	if !plainPath(out, true) {
		return ""
	}
	return out
}

// plainPath reports whether s starts with one slash not followed by a slash and holds no
// backslash and no control character; raw also refuses spaces and anything but ASCII (a
// decoded form may hold them: a browser never reads either as a separator).
func plainPath(s string, raw bool) bool {
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c == 0x7f || c == '\\' || raw && (c == ' ' || c >= 0x80) {
			return false
		}
	}
	return true
}
