package provision_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
)

// A subagent naming a runtime the table does not hold exactly
// (another case, a separator, padding, an invisible or full-width letter, a NUL) is refused at
// provision with the list of known runtimes, whatever else it declares.
func TestRedTeam28V_UnknownOrCasedRuntimeRefused(t *testing.T) {
	f := newFixture(t)
	for _, rt := range []string{"Codex", "CODEX", "Exec", "EXEC", "OpenAI", "Claude-Code", "claude_code", "claudecode",
		"codex ", " exec", "\u200bcodex", "ｃodex", "openai\x00", "exec\n", "codex/../exec"} {
		spec := provision.SubagentSpec{Runtime: rt, Model: "m", SystemPrompt: "p"}
		if strings.EqualFold(strings.TrimSpace(rt), "exec") {
			spec = provision.SubagentSpec{Runtime: rt, Command: []string{"true"}}
		}
		_, err := f.w.PrepareSubagent(t.Context(), "s", spec, nil, nil)
		want := "is not one of exec, claude-code, openai, codex"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("runtime %q: PrepareSubagent = %v, want an error containing %q", rt, err, want)
		}
	}
}
