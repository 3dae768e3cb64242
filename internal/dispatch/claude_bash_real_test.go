package dispatch_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/claudert/anthropictest"
	"github.com/agora-dev/agora/internal/runtimebin"
)

// TestClaudeCode_RealCLI_BashJudgedByGrant: the grant is run_command
// with commands ["git status"] and nothing else. The model asks the real Claude Code CLI's
// Bash for commands Claude allows on its own (read-only built-ins, git reads) and for shell
// lines around the granted command: agora's pre-tool hook refuses each (exit 2, the reason
// is what the model reads), the audit says denied with that reason and never allowed, and
// nothing they would have printed reaches the model. git status still runs, audited allowed.
func TestClaudeCode_RealCLI_BashJudgedByGrant(t *testing.T) {
	t.Parallel() // mostly waiting on a real agent CLI, in a home of its own: beside the other such tests
	claude := anthropictest.RealClaude(filepath.Join("..", ".."))
	if claude == "" {
		t.Skip("SKIP: the real claude CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CLAUDE)")
	}
	bin, err := runtimebin.Resolve(t.Context(), "claude-code", claude)
	if err != nil {
		t.Fatalf("resolve the real claude: %v", err)
	}
	const secret = "TOPSECRET-VALUE-91b2"
	repo := gitRepo(t, map[string]string{"PRIVATE.txt": "s3cret=" + secret + "\n", "README.md": "# repo\n"})
	head, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.TrimSpace(string(head))

	refused := []struct{ id, cmd string }{
		{"toolu_cat", "cat PRIVATE.txt"},
		{"toolu_grep", "grep -r s3cret ."},
		{"toolu_log", "git log -1"},
		{"toolu_remote", "git remote -v"},
		{"toolu_ps", "ps aux"},
		{"toolu_ls", "ls"},
		{"toolu_head", "head PRIVATE.txt"},
		{"toolu_id", "id"},
		{"toolu_lsfiles", "git ls-files"},
		{"toolu_revparse", "git rev-parse HEAD"},
		{"toolu_blame", "git blame PRIVATE.txt"},
		{"toolu_and", "git status && cat PRIVATE.txt"},
		{"toolu_semi", "git status; cat PRIVATE.txt"},
		{"toolu_subst", "git status $(cat PRIVATE.txt)"},
		{"toolu_quoted", "git 'log' -1"},
	}
	var replies []anthropictest.Reply
	for _, c := range refused {
		replies = append(replies, anthropictest.Reply{Blocks: []anthropictest.Block{
			anthropictest.ToolUse(c.id, "Bash", mustJSON(t, map[string]string{"command": c.cmd, "description": "look"}))}})
	}
	replies = append(replies,
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.ToolUse("toolu_status", "Bash", `{"command":"git status","description":"status"}`)}},
		anthropictest.Reply{Blocks: []anthropictest.Block{anthropictest.Text("Done.")}})
	const key = "sk-ant-api03-e2e-bash-0123456789abcdef"
	api, err := anthropictest.Start(key, anthropictest.Turns(replies...))
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
	capDir := filepath.Join(dir, "cap")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("tools: [run_command]\ncommands: [\"git status\"]\n"), 0o644)
	h.agora("capability", "register", "status", "--from", capDir)
	h.agora("subagent", "register", "looker", "--runtime", "claude-code", "--model", "claude-sonnet-4-5",
		"--system-prompt", "You look around.", "--capability", "status")
	h.agora("env", "register", "anthropic", "--value", "ANTHROPIC_BASE_URL="+api.URL, "--secret", "ANTHROPIC_API_KEY=env:ANTHROPIC_API_KEY")

	out := h.agora("dispatch", "run", "--subagent", "looker", "--env", "anthropic", "--repo", repo, "--input", `{"prompt":"look around"}`)
	id, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	var rec struct{ State, Reason, Detail string }
	desc := h.agora("dispatch", "describe", id, "-o", "json")
	if err := json.Unmarshal([]byte(desc), &rec); err != nil || rec.State != "finished" {
		t.Fatalf("dispatch %s: %v %s %s %s", id, err, rec.State, rec.Reason, rec.Detail)
	}

	// What the model received: each refused call's result is the hook's refusal.
	results := toolResultsOf(t, api.Requests())
	for _, c := range refused {
		got, ok := results[c.id]
		if !ok {
			t.Errorf("%s (%q): no tool result reached the model", c.id, c.cmd)
			continue
		}
		if !strings.Contains(got, "agora:") || !strings.Contains(got, "grant") {
			t.Errorf("%s (%q) came back %q, want agora's refusal naming the grant", c.id, c.cmd, got)
		}
	}
	if got := results["toolu_status"]; !strings.Contains(got, "HEAD detached") && !strings.Contains(got, "nothing to commit") {
		t.Errorf("git status came back %q, want its output", got)
	}
	bodies := api.Bodies()
	for _, leak := range []string{secret, sha, "uid=", "PID", "README.md\\n", "PRIVATE.txt\\n"} {
		if strings.Contains(bodies, leak) {
			t.Errorf("the model received %q: a refused command's output reached it", leak)
		}
	}

	// The audit: every refused call denied (pre-tool hook), never requested or allowed.
	byCall := auditByCall(t, h)
	for _, c := range refused {
		got := byCall[c.id]
		if len(got) != 1 || !strings.HasPrefix(got[0], "Bash denied ") || !strings.Contains(got[0], "refused by agora's pre-tool hook") {
			t.Errorf("%s (%q): tool.call entries %q, want one: Bash denied by agora's pre-tool hook", c.id, c.cmd, got)
		}
	}
	if got := strings.Join(byCall["toolu_status"], "; "); !strings.Contains(got, "Bash requested") || !strings.Contains(got, "Bash allowed") {
		t.Errorf("git status: tool.call entries %q, want requested then allowed", got)
	}
}

// toolResultsOf returns, per tool_use_id, the text of the tool_result blocks the model
// received, from the last request holding each.
func toolResultsOf(t *testing.T, reqs []anthropictest.Request) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range reqs {
		var body struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(r.Body, &body) != nil {
			continue
		}
		for _, m := range body.Messages {
			var blocks []struct {
				Type      string          `json:"type"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			}
			if json.Unmarshal(m.Content, &blocks) != nil {
				continue
			}
			for _, b := range blocks {
				if b.Type == "tool_result" {
					out[b.ToolUseID] = string(b.Content)
				}
			}
		}
	}
	return out
}

// auditByCall returns "tool decision reason" of the tool.call entries per call id.
func auditByCall(t *testing.T, h *cliHome) map[string][]string {
	t.Helper()
	var entries []struct {
		Details map[string]any `json:"details"`
	}
	logOut := h.agora("audit", "log", "--kind", "tool.call", "-o", "json")
	if err := json.Unmarshal([]byte(logOut), &entries); err != nil {
		t.Fatalf("audit log: %v\n%s", err, logOut)
	}
	out := map[string][]string{}
	for _, e := range entries {
		id, _ := e.Details["call_id"].(string)
		out[id] = append(out[id], fmt.Sprint(e.Details["tool"], " ", e.Details["decision"], " ", e.Details["reason"]))
	}
	return out
}
