package wire

import (
	"strings"
	"testing"
)

// An attack on the runtime vocabulary: a manifest names its runtime exactly as the table does; a
// differently cased, padded or look-alike name is refused by the host's Marshal and the
// worker's Validate alike, naming the known runtimes.
func TestRedTeam28V_ManifestRuntimeExact(t *testing.T) {
	for _, rt := range []string{"", "Exec", "EXEC", "Codex", "claude_code", "Claude-Code", "OpenAI", "codex ", "\u200bexec", "ｅxec", "exec\x00"} {
		m := validManifest()
		m.Runtime = rt
		err := m.Validate()
		if err == nil || !strings.Contains(err.Error(), "runtime: want one of exec, claude-code, openai, codex") {
			t.Errorf("runtime %q: Validate = %v", rt, err)
		}
		if _, err := m.Marshal(); err == nil {
			t.Errorf("runtime %q: Marshal took it", rt)
		}
	}
}
