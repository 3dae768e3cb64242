package web

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzLocalPath: a redirect target kept after login is a path on this server however a
// browser normalises it (TAB, CR and LF dropped, backslash read as slash) and however often
// it is percent-decoded.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/runs", "//evil.example", "/\\evil.example", "https://evil.example/", "/runs?state=failed", "/x\r\nSet-Cookie: a=b", "",
		"/\t/evil.example/x", "/%09/evil.example", "/%5Cevil", "/%2F/evil", "https:evil", "/%252F%252Fevil", "/a%20b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := localPath(p)
		if got == "" {
			return
		}
		for s, i := got, 0; i < 8; i++ {
			browser := strings.NewReplacer("\t", "", "\r", "", "\n", "", "\\", "/").Replace(s)
			if !strings.HasPrefix(browser, "/") || strings.HasPrefix(browser, "//") {
				t.Fatalf("localPath(%q) = %q, which a browser reads as %q (decoded %d times)", p, got, browser, i)
			}
			d, err := url.PathUnescape(s)
			if err != nil || d == s {
				break
			}
			s = d
		}
		u, err := url.Parse(got)
		if err != nil || u.Host != "" || u.Scheme != "" || u.Opaque != "" || u.Fragment != "" {
			t.Fatalf("localPath(%q) = %q parses as %+v (%v)", p, got, u, err)
		}
		if again := localPath(got); again != got {
			t.Fatalf("localPath(%q) = %q, and again %q", p, got, again)
		}
	})
}

// FuzzDiffLines: every line of a patch is shown, once, in order.
func FuzzDiffLines(f *testing.F) {
	f.Add("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	f.Fuzz(func(t *testing.T, text string) {
		lines := diffLines(text)
		var b strings.Builder
		for i, l := range lines {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(l.Text)
		}
		if b.String() != strings.TrimSuffix(text, "\n") {
			t.Fatalf("lines do not rebuild the text")
		}
	})
}
