package worker

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/shellwords"
)

// TestLearnLine_ReadsBack (#30, suggest): codex's would_deny line reads back as exactly the
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

// TestLearnCommand_ControlCharacters (#30, suggest): a Bash line with a newline is left out of
// the would_deny, not made into another command by turning the newline into a space ("git\npush"
// would have read as `git push`); a tab separates words as a space does. Failed before: every
// control character became a space.
func TestLearnCommand_ControlCharacters(t *testing.T) {
	red := redact.New(nil)
	for _, tc := range []struct{ line, want string }{
		{"git\npush", ""},
		{"true\r\nrm -rf ~", ""},
		{"echo \x1b[2J", ""},
		{"go\ttest ./...", "go test ./..."},
		{"go test ./...", "go test ./..."},
	} {
		input, _ := json.Marshal(map[string]string{"command": tc.line})
		if got := learnCommand(red, hookInput{Tool: "Bash", Input: input}); got != tc.want {
			t.Errorf("learnCommand(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}
