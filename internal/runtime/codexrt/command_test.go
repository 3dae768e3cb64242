package codexrt

import (
	"slices"
	"testing"
)

func TestCommandAllowed(t *testing.T) {
	grants := []string{"git status", "git diff **", "touch *", "sh -c *"}
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"/bin/bash -lc 'git status'", true},
		{"/bin/bash -lc 'git diff --stat HEAD'", true},
		{`/bin/bash -lc "touch out.txt"`, true},
		{"/bin/bash -lc 'touch '\"'\"'it s'\"'\"''", true},
		{"git status", true},
		{"/bin/bash -lc 'sh -c \"echo hi > x\"'", true},
		{"/bin/bash -lc 'git status; rm -rf /'", false},
		{"/bin/bash -lc 'git status && rm -rf /'", false},
		{"/bin/bash -lc 'git status | sh'", false},
		{"/bin/bash -lc 'touch $(rm -rf /)'", false},
		{"/bin/bash -lc 'touch `id`'", false},
		{"/bin/bash -lc 'touch a b'", false},
		{"/bin/bash -lc 'touch *'", false},
		{"/bin/bash -lc 'touch x > y'", false},
		{"/bin/bash -lc 'LD_PRELOAD=/x.so git status'", false},
		{"/bin/bash -lc 'git status\nrm -rf /'", false},
		{"/bin/bash -lc 'touch \"$HOME\"'", false},
		{"/bin/bash -lc 'touch ~/x'", false},
		{"/bin/bash -lc 'rm -rf /'", false},
		{"/bin/bash -lc 'git status", false},
		{"", false},
	} {
		if got := CommandAllowed(grants, tc.line); got != tc.want {
			t.Errorf("CommandAllowed(%q) = %v, want %v (forms %q)", tc.line, got, tc.want, CommandArgv(tc.line))
		}
	}
	// A grant naming the shell allows any script, as it says, however codex quotes it: Codex
	// 0.169.0 writes a script holding a single quote in double quotes.
	for _, line := range []string{
		"/bin/bash -lc 'echo hi > out.txt && ls'",
		`/usr/bin/bash -lc "printf '%s\\n' 'LINE' > NOTES.md && cat NOTES.md"`,
		"/usr/bin/bash -lc \"echo \\\"\\$HOME\\\" \\`id\\`\"",
	} {
		if !CommandAllowed([]string{"bash -lc *"}, line) {
			t.Errorf(`"bash -lc *" does not allow %q`, line)
		}
	}
	// The script is read as the shell reads it, double quotes included.
	if got := CommandArgv(`/usr/bin/bash -lc "git commit -m \"it's\""`); len(got) != 3 || !slices.Equal(got[0], []string{"git", "commit", "-m", "it's"}) {
		t.Errorf("CommandArgv of a double-quoted script = %q", got)
	}
	// A program named like a shell outside the system tree is not read as a shell, nor
	// matched by its base name: the workspace is the model's to write.
	for _, line := range []string{"/work/ws/bash -lc 'git status'", "/usr/bin/zsh -lc 'git status'"} {
		if CommandAllowed([]string{"git status", "bash -lc *"}, line) {
			t.Errorf("%q is allowed as if it were the system shell", line)
		}
	}
	// "bash" found on PATH is what a grant naming "bash" names, but its script is not read.
	if CommandAllowed([]string{"git status"}, "bash -lc 'git status'") || !CommandAllowed([]string{"bash -lc *"}, "bash -lc 'git status'") {
		t.Error(`"bash -lc 'git status'" is judged by its script, or not by its words`)
	}
	if got := CommandArgv("/bin/bash -lc 'git log --format=%H'"); len(got) != 3 || !slices.Equal(got[0], []string{"git", "log", "--format=%H"}) {
		t.Errorf("CommandArgv = %q", got)
	}
}
