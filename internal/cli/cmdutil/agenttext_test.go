package cmdutil_test

import (
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// An agent's question reaches a person's terminal: no escape sequence may pass through.
func TestAgentText(t *testing.T) {
	for in, want := range map[string]string{
		"Which section?\nAdded or Fixed":   "Which section?\nAdded or Fixed",
		"\x1b]52;c;ZXZpbA==\x07 clipboard": `\x1b]52;c;ZXZpbA==\x07 clipboard`,
		"\x1b[2J\x1b[Hcleared":             `\x1b[2J\x1b[Hcleared`,
		"carriage\rreturn":                 `carriage\x0dreturn`,
		"c1 \u009b31m":                     `c1 \u009b31m`,
		"bidi \u202eevil":                  `bidi \u202eevil`,
		"bad utf8 \xff":                    "bad utf8 \uFFFD",
		"tab\tkept, ünïcödé kept":          "tab\tkept, ünïcödé kept",
	} {
		if got := cmdutil.AgentText(in); got != want {
			t.Errorf("agentText(%q) = %q, want %q", in, got, want)
		}
	}
}
