package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// The runtimes section takes a hosted runtime's name exactly:
// another case, a padded or quoted variant, a runtime with no CLI (openai, exec) is refused
// naming the hosted ones, and never configures the real runtime's binary.
func TestRedTeam28V_RuntimeBinaryNamesExact(t *testing.T) {
	for _, n := range []string{"Codex", "CODEX", "Claude-Code", "claude_code", "claude", "openai", "exec", `"codex "`, `"\u200bcodex"`} {
		c := config.Default("/h")
		err := config.Parse("agora.yaml", []byte("runtimes:\n  "+n+": {binary: /opt/evil}\n"), c)
		if err == nil || !strings.Contains(err.Error(), "has no host binary to configure; known: claude-code, codex") {
			t.Errorf("runtimes.%s: Parse = %v, want it refused naming claude-code, codex", n, err)
		}
		if c.RuntimeBinary("codex") == "/opt/evil" || c.RuntimeBinary("claude-code") == "/opt/evil" {
			t.Errorf("runtimes.%s configured a hosted runtime's binary", n)
		}
	}
}
