package anthropictest

import (
	"os"
	"path/filepath"
)

// RealClaude returns the real Claude Code CLI to test with: AGORA_TEST_CLAUDE, else the one
// scripts/agent-clis.sh installs in .cache/npm (root is the repository's root); "" if neither.
func RealClaude(root string) string {
	if p := os.Getenv("AGORA_TEST_CLAUDE"); p != "" {
		return p
	}
	p := filepath.Join(root, ".cache", "npm", "node_modules", ".bin", "claude")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	abs, _ := filepath.Abs(p)
	return abs
}
