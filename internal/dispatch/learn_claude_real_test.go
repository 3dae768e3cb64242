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

// TestLearn_ClaudeCodeRealCLI (#30, claude-code with the real CLI): the grant is run_command
// with commands ["git status"]. In a learn dispatch (agora dispatch run --learn) the model's
// Bash line the grant does not name is reported by agora's pre-tool hook as tool.would_deny
// (tool Bash, the command, the call id) and then runs: its output reaches the model and the
// call is requested and allowed on record. The same line in a dispatch without --learn is
// refused, as before, with no would_deny. Failed before: the hook refused it in both.
func TestLearn_ClaudeCodeRealCLI(t *testing.T) {
	claude := anthropictest.RealClaude(filepath.Join("..", ".."))
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "claude-code", claude)
	if err != nil {
		t.Fatalf("resolve the real claude: %v", err)
	}
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	const line = "echo learned-$((6*7))"
	turn := func(id string) []anthropictest.Reply {
		return []anthropictest.Reply{
			{Blocks: []anthropictest.Block{anthropictest.ToolUse(id, "Bash", mustJSON(t, map[string]string{"command": line, "description": "compute"}))}},
			{Blocks: []anthropictest.Block{anthropictest.Text("Done.")}},
		}
	}
	const key = "sk-ant-api03-e2e-learn-0123456789abcdef"
	// One fake per dispatch: a script answers by turn, and both dispatches' first turn asks.
	api, err := anthropictest.Start(key, anthropictest.Turns(turn("toolu_learn")...))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	plainAPI, err := anthropictest.Start(key, anthropictest.Turns(turn("toolu_plain")...))
	if err != nil {
		t.Fatal(err)
	}
	defer plainAPI.Close()
	dir := t.TempDir()
	h := &cliHome{t: t, dir: filepath.Join(dir, "home"), env: []string{"ANTHROPIC_API_KEY=" + key}}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("runtimes:\n  claude-code: {binary: %s}\negress:\n  allow_private: [127.0.0.1/32]\n", bin.Path)
	if err := os.WriteFile(filepath.Join(h.dir, "agora.yaml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	capDir := filepath.Join(dir, "cap")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("tools: [run_command]\ncommands: [\"git status\"]\n"), 0o644)
	h.agora("capability", "register", "status", "--from", capDir)
	h.agora("subagent", "register", "looker", "--runtime", "claude-code", "--model", "claude-sonnet-4-5",
		"--system-prompt", "You look around.", "--capability", "status")
	h.agora("env", "register", "anthropic", "--value", "ANTHROPIC_BASE_URL="+api.URL, "--secret", "ANTHROPIC_API_KEY=env:ANTHROPIC_API_KEY")

	run := func(extra ...string) string {
		out := h.agora(append([]string{"dispatch", "run", "--subagent", "looker", "--env", "anthropic", "--repo", repo, "--input", `{"prompt":"compute"}`}, extra...)...)
		id, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		var rec struct {
			State, Reason, Detail string
			Learn                 bool
		}
		if err := json.Unmarshal([]byte(h.agora("dispatch", "describe", id, "-o", "json")), &rec); err != nil || rec.State != "finished" {
			t.Fatalf("dispatch %s: %v %s %s %s", id, err, rec.State, rec.Reason, rec.Detail)
		}
		if rec.Learn != (len(extra) > 0) {
			t.Errorf("dispatch %s learn = %v", id, rec.Learn)
		}
		return id
	}
	run("--learn")
	h.agora("env", "register", "anthropic", "--value", "ANTHROPIC_BASE_URL="+plainAPI.URL, "--secret", "ANTHROPIC_API_KEY=env:ANTHROPIC_API_KEY")
	run()

	results := toolResultsOf(t, append(api.Requests(), plainAPI.Requests()...))
	if got := results["toolu_learn"]; !strings.Contains(got, "learned-42") {
		t.Errorf("the learn dispatch's Bash came back %q, want its output", got)
	}
	if got := results["toolu_plain"]; strings.Contains(got, "learned-42") || !strings.Contains(got, "grant") {
		t.Errorf("without learn the Bash came back %q, want agora's refusal", got)
	}
	var would []struct {
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(h.agora("audit", "log", "--kind", "tool.would_deny", "-o", "json")), &would); err != nil {
		t.Fatal(err)
	}
	if len(would) != 1 || would[0].Details["tool"] != "Bash" || would[0].Details["command"] != line || would[0].Details["call_id"] != "toolu_learn" {
		t.Errorf("tool.would_deny entries = %+v, want one: Bash %q of toolu_learn", would, line)
	} else if r := would[0].Details["reporter"]; r != "hook" {
		// #30 F7: claude's hook, relayed by the worker with its key.
		t.Errorf("the hook's would_deny has reporter %v, want hook", r)
	}
	byCall := auditByCall(t, h)
	if got := strings.Join(byCall["toolu_learn"], "; "); !strings.Contains(got, "Bash requested") || !strings.Contains(got, "Bash allowed") {
		t.Errorf("learn call: tool.call entries %q, want requested then allowed", got)
	}
	if got := byCall["toolu_plain"]; len(got) != 1 || !strings.HasPrefix(got[0], "Bash denied ") {
		t.Errorf("plain call: tool.call entries %q, want one denial", got)
	}
}
