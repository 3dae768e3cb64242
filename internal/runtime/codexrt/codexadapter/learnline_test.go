package codexadapter

import (
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/shellwords"
)

// TestLearnLine_ReadsBack (suggest): codex's would_deny line reads back as exactly the
// argv the gate judged. Joined with bare spaces, ["bash", "-lc", "make test"] read back as a
// four-word command that never ran, which `agora capability suggest` would have proposed.
// Failed before: the line was strings.Join(argv, " ").
func TestLearnLine_ReadsBack(t *testing.T) {
	for _, argv := range [][]string{
		{"bash", "-lc", "make test"},
		{"git", "status --exec=x"},
		{"printf", "", "it's", "=x", "*"},
	} {
		got, err := shellwords.Split(learnLine(argv))
		if err != nil || !slices.Equal(got, argv) {
			t.Errorf("line %q reads back as %q (%v), want %q", learnLine(argv), got, err, argv)
		}
	}
}
