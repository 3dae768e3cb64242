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

// FuzzMask: a known path never survives Text, whatever surrounds it.
func FuzzMask(f *testing.F) {
	f.Add("/tmp/t1/repo", "before ", " after")
	f.Add("/srv/a b", "x/", "/y")
	f.Fuzz(func(t *testing.T, known, before, after string) {
		if strings.TrimRight(known, "/") == "" {
			return
		}
		m := New(known)
		got := m.Text(before + known + after)
		if strings.Contains(got, strings.TrimRight(known, "/")) && !strings.Contains(Hidden, strings.TrimRight(known, "/")) {
			// The known path may only reappear as part of the replacement or of what was
			// around it; never where it was.
			if strings.Count(got, strings.TrimRight(known, "/")) > strings.Count(before+after+Hidden, strings.TrimRight(known, "/")) {
				t.Fatalf("Text(%q) = %q keeps %q", before+known+after, got, known)
			}
		}
		_ = m.HostText(before + known + after)
	})
}

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
