package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stubNPM stands in for npm: it logs its argv to $STUB_LOG and, for install, writes each
// package@version's package.json under --prefix as npm would.
const stubNPM = `#!/bin/sh
echo "npm $*" >>"$STUB_LOG"
[ "$1" = install ] || exit 0
prefix=
for a in "$@"; do
	if [ "$want_prefix" = 1 ]; then prefix=$a; want_prefix=; continue; fi
	case $a in
	--prefix) want_prefix=1 ;;
	@*@*) name=${a%@*}; ver=${a##*@}
		mkdir -p "$prefix/node_modules/$name"
		printf '{"name": "%s", "version": "%s"}\n' "$name" "$ver" >"$prefix/node_modules/$name/package.json" ;;
	esac
done
`

// TestAgentCLIs runs scripts/agent-clis.sh (called by .ci/run) in a copy of the repository
// layout with a stub npm: the first run installs both pinned CLIs into .cache/npm with
// --prefix, never globally; the second changes nothing and calls no npm; a changed pin
// reinstalls only that package.
func TestAgentCLIs(t *testing.T) {
	src, err := os.ReadFile("agent-clis.sh")
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(CLAUDE_CODE_VERSION|CODEX_VERSION)=(\S+)$`).FindAllStringSubmatch(string(src), -1) {
		pins[m[1]] = m[2]
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(pins["CLAUDE_CODE_VERSION"]) || !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(pins["CODEX_VERSION"]) {
		t.Fatalf("the script pins no exact versions: %v", pins)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "agent-clis.sh")
	if err := os.WriteFile(script, src, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, tool := range []string{"sh", "dirname", "grep", "mkdir", "printf", "cat", "bash"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("SKIP: %s not found", tool)
		}
		os.Symlink(p, filepath.Join(bin, tool))
	}
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(stubNPM), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "npm.log")
	run := func() string {
		t.Helper()
		os.Remove(log)
		cmd := exec.Command("bash", script)
		cmd.Env = []string{"PATH=" + bin, "STUB_LOG=" + log, "HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("agent-clis.sh: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(log)
		return strings.TrimSpace(string(b))
	}
	claude := "@anthropic-ai/claude-code@" + pins["CLAUDE_CODE_VERSION"]
	codex := "@openai/codex@" + pins["CODEX_VERSION"]
	first := run()
	if !strings.HasPrefix(first, "npm install --prefix .cache/npm ") || !strings.Contains(first, claude) || !strings.Contains(first, codex) || strings.Contains(first, " -g") {
		t.Errorf("first run called %q, want one npm install --prefix .cache/npm of %s and %s", first, claude, codex)
	}
	if again := run(); again != "" {
		t.Errorf("second run called npm: %q, want nothing (already installed)", again)
	}
	// An older codex installed: only codex is installed again.
	pj := filepath.Join(root, ".cache", "npm", "node_modules", "@openai", "codex", "package.json")
	if err := os.WriteFile(pj, []byte(`{"name": "@openai/codex", "version": "0.0.1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run(); !strings.Contains(got, codex) || strings.Contains(got, claude) {
		t.Errorf("after a version change npm got %q, want only %s", got, codex)
	}
}
