package hostpath

import (
	"strings"
	"testing"
)

func TestMask_Text(t *testing.T) {
	m := New("/tmp/t1/private-repo", "/home/alice/.agora/", "")
	for in, want := range map[string]string{
		"repository /tmp/t1/private-repo is not a directory": "repository (host path hidden) is not a directory",
		"origin\t/tmp/t1/private-repo (fetch)":               "origin\t(host path hidden) (fetch)",
		"/tmp/t1/private-repo/.git/config":                   "(host path hidden)",
		"url = file:///tmp/t1/private-repo":                  "url = file://(host path hidden)",
		"/tmp/t1/private-repo-2 is another":                  "/tmp/t1/private-repo-2 is another",
		"blob /home/alice/.agora/blobs/ab: gone":             "blob (host path hidden): gone",
		`"repo":"/tmp/t1/private-repo"`:                      `"repo":"(host path hidden)"`,
		"/work/x.txt in the sandbox is kept":                 "/work/x.txt in the sandbox is kept",
		"/x/tmp/t1/private-repo ends with it":                "/x(host path hidden) ends with it",
	} {
		if got := m.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
	var none *Mask
	if got := none.Text("/tmp/t1/private-repo"); got != "/tmp/t1/private-repo" {
		t.Errorf("a nil Mask changed text: %q", got)
	}
}

// TestMask_OverlappingOccurrence: a whole occurrence of a known path that starts inside
// another name's match is still hidden (found by FuzzMask).
func TestMask_OverlappingOccurrence(t *testing.T) {
	for known, in := range map[string]string{"/ab/a": "/ab/ab/a", "00": "000 x"} {
		if got := New(known).Text(in); strings.Contains(got, known) {
			t.Errorf("New(%q).Text(%q) = %q, keeps the known path", known, in, got)
		}
	}
}

func TestMask_HostText(t *testing.T) {
	m := New("/srv/my repo")
	for in, want := range map[string]string{
		"repository /tmp/t1/private-repo is not a directory": "repository (host path hidden) is not a directory",
		"checkout /srv/my repo: exit status 128":             "checkout (host path hidden): exit status 128",
		"open ~/src/app/x: permission denied":                "open (host path hidden): permission denied",
		`stat "/var/lib/agora/blobs/x"`:                      `stat "(host path hidden)"`,
		"path=/etc/passwd,mode=r":                            "path=(host path hidden),mode=r",
		"worker-failed: exit status 3":                       "worker-failed: exit status 3",
		"see a/b/c and /tmp":                                 "see a/b/c and /tmp",
		"url http://example.com/a/b":                         "url http://example.com/a/b",
	} {
		if got := m.HostText(in); got != want {
			t.Errorf("HostText(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzMask: a known path never survives Text as a whole path, whatever surrounds it. The
// replacement is read as one opaque byte: "0(" known, "0" then Hidden reads "0(host path
// hidden)", which spells the known path across the seam without showing any of it (CI found it).
//
// Inputs are as large as the mask meets them: a host path (at most PATH_MAX) in a text of at
// most 64 KiB. Text, and this check, cost up to the text's length times the path's on a text
// that repeats the path's bytes (a 64 KiB path in 256 KiB: 1.8 s on an idle machine), and the
// fuzzing engine takes an input that runs 10 s on the wall clock for a hung worker, which a
// loaded machine reached with inputs a corpus grows to. Bounded, the worst input costs 20 ms,
// and none fails for the machine's load.
func FuzzMask(f *testing.F) {
	f.Add("/tmp/t1/repo", "before ", " after")
	f.Add("/srv/a b", "x/", "/y")
	f.Add("0(", "0", " 1")
	f.Fuzz(func(t *testing.T, known, before, after string) {
		k := strings.TrimRight(known, "/")
		in := before + known + after
		if k == "" || len(known) > maxFuzzPath || len(in) > maxFuzzText || strings.Contains(in, "\x00") || strings.Contains(in, Hidden) {
			return
		}
		got := New(known).Text(in)
		seen := strings.ReplaceAll(got, Hidden, "\x00")
		for i := 0; ; i++ {
			j := strings.Index(seen[i:], k)
			if j < 0 {
				break
			}
			i += j
			// What is left may only be the start of another name ("/srv/app" in "/srv/apple").
			// Before a replacement (the NUL) it was followed by the known path's first byte,
			// which continues a name only if it is a path byte other than '/' ("0" in "000").
			end := i + len(k)
			next := byte('/')
			if end < len(seen) {
				next = seen[end]
			}
			if next == 0 {
				next = k[0]
			}
			if end == len(seen) || !pathByte(next) || next == '/' {
				t.Fatalf("Text(%q) = %q keeps %q as a whole path at %d", in, got, k, i)
			}
		}
		_ = New(known).HostText(in)
	})
}

// The largest inputs FuzzMask tries: a path of PATH_MAX bytes, a text of 64 KiB.
const maxFuzzPath, maxFuzzText = 4096, 64 << 10

func TestMask_HostTextURLs(t *testing.T) {
	for in, want := range map[string]string{
		"fetch file:///tmp/x/repo failed": "fetch file://(host path hidden) failed",
		"GET http://127.0.0.1:8080/a/b":   "GET http://127.0.0.1:8080/a/b",
	} {
		if got := New().HostText(in); got != want {
			t.Errorf("HostText(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzMaskTailHead: a cut never shows a piece (four bytes or more) of a known path that it
// split, and never panics; with no mask it is the plain cut.
func FuzzMaskTailHead(f *testing.F) {
	f.Add("x /srv/acme-secret y /srv/acme-secret", 10)
	f.Add("/srv/acme-secret/srv/acme-secret", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		const known = "/srv/acme-secret"
		m := New(known)
		for i := 0; ; {
			j := strings.Index(s[i:], known)
			if j < 0 {
				break
			}
			if end := i + j + len(known); end < len(s) && pathByte(s[end]) && s[end] != '/' {
				return // a longer name ("/srv/acme-secret0") is no known path: shown whole
			}
			i += j + 1
		}
		for name, got := range map[string]string{"tail": m.Tail(s, n), "head": m.Head(s, n)} {
			// What s holds besides the path: a piece found only in the path must not show.
			// (The mask leaves a longer name alone, "/srv/acme-secret0", and hides what lies
			// below a path with it.)
			rest, whole := strings.ReplaceAll(s, known, "\x00"), m.Text(s)
			for i := 0; i+4 <= len(known); i++ {
				if frag := known[i : i+4]; strings.Contains(got, frag) && !strings.Contains(rest, frag) && !strings.Contains(whole, frag) {
					t.Fatalf("%s(%q, %d) = %q shows %q of the path", name, s, n, got, frag)
				}
			}
		}
		if got := (*Mask)(nil).Tail(s, n); got != s[max(len(s)-n, 0):] {
			t.Fatalf("nil Tail = %q", got)
		}
	})
}
