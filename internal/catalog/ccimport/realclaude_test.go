package ccimport

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
)

// claudeAgents is a .claude/agents directory as Claude Code writes and reads it: the
// wizard's shape (a quoted description with \n escapes, comma-separated tools, a model alias,
// a color), a tools list, a subdirectory, CRLF line ends, a README it skips, and two files
// whose tools are absent or empty.
var claudeAgents = map[string]string{
	"code-reviewer.md":     reviewer,
	"team/test-fixer.md":   "---\nname: test-fixer\ndescription: Fixes failing Go tests.\ntools:\n  - Read\n  - Edit\n  - \"Bash(go test:*)\"\n  - Grep, Glob\nmodel: claude-sonnet-4-5\n---\nYou fix failing tests.\n",
	"docs-reader.md":       "---\r\nname: docs-reader\r\ndescription: Reads the Go documentation.\r\ntools: Read WebFetch(domain:pkg.go.dev) TodoWrite\r\nmodel: inherit\r\n---\r\nYou read docs.\r\n",
	"README.md":            "# Our subagents\n\nThese are loaded by Claude Code.\n",
	"all-tools/absent.md":  "---\nname: absent-tools\ndescription: Lists no tools.\n---\nYou may do anything.\n",
	"all-tools/empty.md":   "---\nname: empty-tools\ndescription: Lists an empty tools list.\ntools: []\n---\nYou may do anything.\n",
	"all-tools/blank.md":   "---\nname: blank-tools\ndescription: Lists an empty tools string.\ntools: \"\"\n---\nYou may do anything.\n",
	"all-tools/nothing.md": "---\nname: null-tools\ndescription: Lists tools as null.\ntools:\n---\nYou may do anything.\n",
}

// TestRealClaude_ReadsWhatTheImportReads has the real Claude Code CLI load a .claude/agents
// directory and checks, subagent by subagent, that what it offers its model (name,
// description, tools) is what the import reads from the same files; that it skips the
// README as the import does; and that it gives every file without tools, or with an empty
// tools, every tool: the import refuses those.
func TestRealClaude_ReadsWhatTheImportReads(t *testing.T) {
	claude := anthropictest.RealClaude(filepath.Join("..", "..", ".."))
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	const key = "sk-ant-api03-ccimport-0123456789abcdefghij"
	api, err := anthropictest.Start(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	project := t.TempDir()
	agentsDir := filepath.Join(project, ".claude", "agents")
	for p, content := range claudeAgents {
		full := filepath.Join(agentsDir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, "-p", "hello", "--output-format", "stream-json", "--verbose", "--setting-sources", "project")
	cmd.Dir = project
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=" + key}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("claude: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	var initEv struct {
		Type, Subtype string
		Agents        []string `json:"agents"`
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	if err := json.Unmarshal(first, &initEv); err != nil || initEv.Subtype != "init" {
		t.Fatalf("claude's first event is not init: %v\n%s", err, first)
	}
	offered := modelText(t, api)

	// The files the import takes: claude lists each as the import reads it.
	for _, p := range []string{"code-reviewer.md", "team/test-fixer.md", "docs-reader.md"} {
		s, err := Load(filepath.Join(agentsDir, p), nil)
		if err != nil {
			t.Fatalf("import %s: %v", p, err)
		}
		a := s.Agents[0].Agent
		if !slices.Contains(initEv.Agents, a.Name) {
			t.Errorf("claude did not load %s (%s); it loaded %v", a.Name, p, initEv.Agents)
		}
		var entries []string
		for _, tool := range a.Tools {
			entries = append(entries, tool.Entry)
		}
		line := "- " + a.Name + ": " + a.Description + " (Tools: " + strings.Join(entries, ", ") + ")"
		if !strings.Contains(offered, line) {
			t.Errorf("claude does not offer %s as the import reads it; want the line\n%s\nin what it sent its model:\n%.4000s", p, line, agentList(offered))
		}
	}
	// The README: skipped by both.
	if _, err := Load(filepath.Join(agentsDir, "README.md"), nil); err == nil || !strings.Contains(err.Error(), "no Claude Code subagent files") {
		t.Errorf("the import of the README alone: %v; want nothing to import", err)
	}
	for _, name := range initEv.Agents {
		if strings.Contains(strings.ToLower(name), "readme") {
			t.Errorf("claude loaded the README as %q", name)
		}
	}
	// No tools, or empty ones: claude gives every tool, and the import refuses each.
	for _, p := range []string{"absent.md", "empty.md", "blank.md", "nothing.md"} {
		file := filepath.Join(agentsDir, "all-tools", p)
		src, _ := os.ReadFile(file)
		a, _, err := Parse(file, p, src)
		if err != nil {
			t.Fatal(err)
		}
		if line := "- " + a.Name + ": " + a.Description + " (Tools: All tools)"; !strings.Contains(offered, line) {
			t.Errorf("claude does not give %s every tool; want %q in:\n%.4000s", p, line, agentList(offered))
		}
		if _, err := Load(file, nil); err == nil || !strings.Contains(err.Error(), "no tools: Claude Code gives such a subagent every tool") {
			t.Errorf("the import of %s: %v; want it refused", p, err)
		}
	}
}

// modelText is every string of every request claude sent the model, JSON-decoded and
// joined: the system prompt, the tools' descriptions, the messages.
func modelText(t *testing.T, api *anthropictest.Server) string {
	t.Helper()
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(v)
			b.WriteByte('\n')
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for _, r := range api.Requests() {
		var v any
		if json.Unmarshal(r.Body, &v) == nil {
			walk(v)
		}
	}
	if b.Len() == 0 {
		t.Fatal("claude sent the model nothing")
	}
	return b.String()
}

// agentList is the part of s that lists subagents, for a failure message.
func agentList(s string) string {
	if i := strings.Index(s, "Available agent types"); i >= 0 {
		return s[i:]
	}
	return s
}
