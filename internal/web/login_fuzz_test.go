package web

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzLocalPath: a redirect target kept after login is always a path on this server.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/runs", "//evil.example", "/\\evil.example", "https://evil.example/", "/runs?state=failed", "/x\r\nSet-Cookie: a=b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := localPath(p)
		if got == "" {
			return
		}
		if got != p || !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.HasPrefix(got, "/\\") || strings.ContainsAny(got, "\r\n") {
			t.Fatalf("localPath(%q) = %q", p, got)
		}
		if u, err := url.Parse(got); err == nil && u.Host != "" {
			t.Fatalf("localPath(%q) = %q names host %q", p, got, u.Host)
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
