package claudeadapter

import (
	"encoding/json"
	"testing"

	"github.com/agora-dev/agora/internal/secret/redact"
)

// TestLearnCommand_ControlCharacters (suggest): a Bash line with a newline is left out of
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
