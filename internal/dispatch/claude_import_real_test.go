package dispatch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// scoutAgent is a Claude Code subagent file as Claude Code's /agents wizard writes one.
const scoutAgent = `---
name: scout
description: "Looks at the repository and reports.\nUse it for status questions."
tools: Read, Bash(git status)
model: sonnet
color: green
---

You are the scout. SCOUT-PROMPT-7f3a: read the README, then report what git status says.
`

// TestClaudeCode_RealCLI_ImportedSubagent (import): a subagent imported from a
// .claude/agents directory with the real agora binary runs as a claude-code dispatch of the
// real Claude Code CLI against the streaming fake Messages API. Its body reached the model as
// the system prompt and its model alias as the model; the tools its file lists hold (Read,
// and Bash for git status alone), and what it does not list is refused: Write (never
// loaded), Bash git log (agora's pre-tool hook), each audited denied and never allowed.
func TestClaudeCode_RealCLI_ImportedSubagent(t *testing.T) {
	claude := anthropictest.RealClaude(filepath.Join("..", ".."))
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "claude-code", claude)
	if err != nil {
		t.Fatalf("resolve the real claude: %v", err)
	}
	repo := gitRepo(t, map[string]string{"README.md": "# scouting grounds: README-TEXT-51c0\n"})
	const key = "sk-ant-api03-e2e-import-0123456789abcd"
	api, err := anthropictest.Start(key, anthropictest.Turns(
		anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse("toolu_read", "Read", `{"file_path":"/agora/workspace/README.md"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse("toolu_write", "Write", `{"file_path":"/agora/workspace/notes.md","content":"not granted\n"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse("toolu_log", "Bash", `{"command":"git log -1","description":"history"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse("toolu_status", "Bash", `{"command":"git status","description":"status"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.Text("Scouted.")}},
	))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()

	dir := t.TempDir()
	h := &cliHome{t: t, dir: filepath.Join(dir, "home"), env: []string{"ANTHROPIC_API_KEY=" + key}}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("runtimes:\n  claude-code: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32]\n", bin.Path)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	agents := filepath.Join(dir, "project", ".claude", "agents")
	os.MkdirAll(agents, 0o755)
	if err := os.WriteFile(filepath.Join(agents, "scout.md"), []byte(scoutAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	out := h.agora("subagent", "import", agents)
	for _, want := range []string{"line 4: Read -> read_file", `line 4: Bash(git status) -> run_command "git status"`, "+ subagent scout", "Imported."} {
		if !strings.Contains(out, want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	h.agora("env", "register", "anthropic", "--value", "ANTHROPIC_BASE_URL="+api.URL, "--secret", "ANTHROPIC_API_KEY=env:ANTHROPIC_API_KEY")

	out = h.agora("dispatch", "run", "--subagent", "scout", "--env", "anthropic", "--repo", repo, "--input", `{"prompt":"scout the repository"}`)
	id, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	var rec struct{ State, Reason, Detail string }
	desc := h.agora("dispatch", "describe", id, "-o", "json")
	if err := json.Unmarshal([]byte(desc), &rec); err != nil || rec.State != "finished" {
		t.Fatalf("dispatch %s: %v %s %s %s\n%s", id, err, rec.State, rec.Reason, rec.Detail, desc)
	}

	// The file's body is the system prompt and its model alias the model, in every turn.
	turns := 0
	for _, r := range api.Requests() {
		if r.Path != "/v1/messages" || len(r.Tools) == 0 {
			continue
		}
		turns++
		var body struct {
			System json.RawMessage `json:"system"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil || !strings.Contains(string(body.System), "SCOUT-PROMPT-7f3a") {
			t.Errorf("turn %d: the imported prompt is not in the system prompt: %.300s", r.Turn, body.System)
		}
		if !strings.Contains(r.Model, "sonnet") {
			t.Errorf("turn %d asked for model %q, want the sonnet the file names", r.Turn, r.Model)
		}
		if strings.Contains(strings.Join(r.Tools, ","), "Write") {
			t.Errorf("turn %d offered the model Write, which the file does not list: %v", r.Turn, r.Tools)
		}
	}
	if turns < 5 {
		t.Errorf("%d model turns with tools, want 5", turns)
	}

	results := toolResultsOf(t, api.Requests())
	if !strings.Contains(results["toolu_read"], "README-TEXT-51c0") {
		t.Errorf("the granted Read came back %q", results["toolu_read"])
	}
	if got := results["toolu_status"]; !strings.Contains(got, "HEAD detached") && !strings.Contains(got, "nothing to commit") {
		t.Errorf("git status came back %q, want its output", got)
	}
	byCall := auditByCall(t, h)
	for id, want := range map[string]string{"toolu_read": "Read allowed", "toolu_status": "Bash allowed"} {
		if got := strings.Join(byCall[id], "; "); !strings.Contains(got, want) {
			t.Errorf("%s: tool.call entries %q, want %q", id, got, want)
		}
	}
	for _, id := range []string{"toolu_write", "toolu_log"} {
		got := strings.Join(byCall[id], "; ")
		if !strings.Contains(got, " denied ") || strings.Contains(got, "allowed") {
			t.Errorf("%s: tool.call entries %q, want denied and never allowed", id, got)
		}
	}
	if patch := h.agora("dispatch", "patch", id); strings.Contains(patch, "notes.md") {
		t.Errorf("the refused Write is in the patch:\n%s", patch)
	}

	// The import is on record: the versions it made and the file it read, by digest.
	logOut := h.agora("audit", "log", "--kind", "catalog.*", "-o", "json")
	for _, want := range []string{`"catalog.capability.import"`, `"catalog.subagent.import"`, `"catalog.import"`, `"file": "scout.md"`} {
		if !strings.Contains(logOut, want) {
			t.Errorf("the audit log lacks %s:\n%s", want, logOut)
		}
	}
}
