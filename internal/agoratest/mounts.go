package agoratest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// UnmountedAtCleanup registers a cleanup, to run before those registered earlier (a
// t.TempDir's removal), that waits up to a minute until nothing is mounted at or under dir:
// a dispatch's disk (a tmpfs agora mounts as root) is unmounted by its supervisor after the
// dispatch's record says it ended, so a test that waited for the end can reach its TempDir's
// removal while the mount is still there ("device or resource busy"). The wait reads the
// mount table; it fails naming the mounts that stay.
func UnmountedAtCleanup(t testing.TB, dir string) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var left []string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(waitPoll) {
			if left = mountsUnder(abs); len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("still mounted under %s a minute after the test: %s", abs, strings.Join(left, ", "))
				return
			}
		}
	})
}

// mountsUnder lists the mount points at or under dir in this process's mount namespace.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil // no mount table to read: nothing this helper can wait for
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMount(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
