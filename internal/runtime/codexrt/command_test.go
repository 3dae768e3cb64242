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
	// A grant naming the shell allows any script, as it says.
	if !CommandAllowed([]string{"bash -lc *"}, "/bin/bash -lc 'echo hi > out.txt && ls'") {
		t.Error(`"bash -lc *" does not allow a script`)
	}
	if got := CommandArgv("/bin/bash -lc 'git log --format=%H'"); len(got) != 3 || !slices.Equal(got[0], []string{"git", "log", "--format=%H"}) {
		t.Errorf("CommandArgv = %q", got)
	}
}
