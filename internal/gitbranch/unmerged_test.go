package gitbranch

import (
	"slices"
	"strings"
	"testing"
)

// FuzzUnmerged: `git ls-files -u -z` output (or anything) gives each path after a tab once,
// sorted, and never a path that was not in the output.
func FuzzUnmerged(f *testing.F) {
	f.Add([]byte("100644 aaaa 1\tshared.txt\x00100644 bbbb 2\tshared.txt\x00100644 cccc 3\tshared.txt\x00100644 dddd 2\ta b\tc\x00"))
	f.Add([]byte("no tab\x00\x00\t\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		files := unmerged(out)
		if !slices.IsSorted(files) || len(slices.Compact(slices.Clone(files))) != len(files) {
			t.Fatalf("unmerged(%q) = %q: not sorted and unique", out, files)
		}
		for _, p := range files {
			if !strings.Contains(string(out), "\t"+p) {
				t.Fatalf("unmerged(%q) invented %q", out, p)
			}
		}
	})
}

func TestUnmerged(t *testing.T) {
	got := unmerged([]byte("100644 aaaa 1\tshared.txt\x00100644 bbbb 2\tshared.txt\x00100644 dddd 2\ta b\tc\x00"))
	if strings.Join(got, "|") != "a b\tc|shared.txt" {
		t.Errorf("unmerged = %q", got)
	}
}
