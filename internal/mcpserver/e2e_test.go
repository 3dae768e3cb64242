package mcpserver_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/mcpserver"
)

func requireSandbox(t *testing.T) {
	t.Helper()
	if err := local.Available(); err != nil {
		t.Skipf("SKIP: bubblewrap sandbox not available here (apt-get install bubblewrap): %v", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed")
	}
}

type dispatchOut struct {
	Dispatch mcpserver.Record `json:"dispatch"`
	Note     string           `json:"note"`
}

// TestLists_RealCatalog lists a catalog registered through the real CLI: keys and metadata
// come back, prompts, commands, values and secrets never do.
func TestLists_RealCatalog(t *testing.T) {
	cs := stdioSession(t, newHome(t))
	var envs struct {
		Envs []struct {
			Name       string   `json:"name"`
			ValueKeys  []string `json:"value_keys"`
			SecretKeys []string `json:"secret_keys"`
		} `json:"envs"`
	}
	res := call(t, cs, "agora_envs_list", nil)
	decode(t, res, &envs)
	if len(envs.Envs) != 1 || !cmp.Equal(envs.Envs[0].ValueKeys, []string{"GREETING"}) || !cmp.Equal(envs.Envs[0].SecretKeys, []string{"DEMO_TOKEN"}) {
		t.Errorf("envs = %+v", envs)
	}
	all := text(res) + text(call(t, cs, "agora_subagents_list", nil)) + text(call(t, cs, "agora_capabilities_list", nil))
	for _, canary := range []string{secretCanary, "VALUE-CANARY", "PROMPT-CANARY", "COMMAND-CANARY", "sh -c", "secret:", "sealed"} {
		if strings.Contains(all, canary) {
			t.Errorf("a list carries %q:\n%s", canary, all)
		}
	}
	if !strings.Contains(all, `"runtime":"exec"`) || !strings.Contains(all, `"capabilities":[{"name":"shell","digest":"sha256:`) {
		t.Errorf("subagent metadata missing:\n%s", all)
	}
}

// TestDispatchOverStdio dispatches real sandboxed workers through the real binary over stdio:
// one that finishes, one that asks a question, one the catalog denies, and one that runs on
// after the MCP session that started it is gone, until another session cancels it.
func TestDispatchOverStdio(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	cs := stdioSession(t, home)

	var fin dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{
		"subagent": "writer", "envs": []string{"demo"}, "input": map[string]any{"task": "greet"}, "wait_seconds": 120,
	}), &fin)
	r := fin.Dispatch
	if r.State != "finished" || !r.Done || r.ExitCode == nil || *r.ExitCode != 0 || r.Patch == nil || fin.Note != "" {
		t.Fatalf("writer: %+v", fin)
	}
	if len(r.Outputs) != 1 || r.Outputs[0].Path != "report.md" || !strings.HasPrefix(r.Outputs[0].Digest, "sha256:") {
		t.Errorf("outputs = %+v", r.Outputs)
	}
	if r.Actor != "mcp:"+actorOf(t) || len(r.Envs) != 1 || r.Envs[0].Name != "demo" || !strings.HasPrefix(r.Envs[0].Digest, "sha256:") ||
		r.Subagent != "writer" || !strings.HasPrefix(r.SubagentDigest, "sha256:") {
		t.Errorf("record = %+v", r)
	}
	var desc dispatchOut
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": r.ID}), &desc)
	if desc.Dispatch.State != "finished" || desc.Dispatch.Patch.Digest != r.Patch.Digest || len(desc.Dispatch.Events) < 3 {
		t.Errorf("describe = %+v", desc)
	}

	var ask dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "asker", "wait_seconds": 120}), &ask)
	if q := ask.Dispatch.NeedsInput; ask.Dispatch.State != "needs_input" || q == nil || q.Question != "Which color?" || !cmp.Equal(q.Options, []string{"red", "blue"}) {
		t.Errorf("asker = %+v", ask.Dispatch)
	}

	var rogue dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "rogue"}), &rogue)
	if rogue.Dispatch.State != "failed" || rogue.Dispatch.Reason != "denied" || rogue.Dispatch.StartedAt != nil {
		t.Errorf("rogue = %+v", rogue.Dispatch)
	}

	res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "nobody"})
	if want := `agora_dispatch refused: subagent "nobody" not found; known: asker, rogue, sleeper, writer`; text(res) != want {
		t.Errorf("got %q, want %q", text(res), want)
	}

	var slow dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "sleeper", "wait_seconds": 1, "timeout_seconds": 600}), &slow)
	if slow.Dispatch.State != "started" || slow.Dispatch.Done || slow.Note == "" || slow.Dispatch.TimeoutSeconds != 600 {
		t.Fatalf("sleeper = %+v", slow)
	}
	cs.Close() // the MCP server exits; the detached supervisor keeps the worker running

	cs2 := stdioSession(t, home)
	var later dispatchOut
	decode(t, call(t, cs2, "agora_dispatch_describe", map[string]any{"id": slow.Dispatch.ID}), &later)
	if later.Dispatch.State != "started" {
		t.Fatalf("after the session ended the dispatch is %q, want started", later.Dispatch.State)
	}
	for range 2 { // cancel is idempotent
		var c dispatchOut
		decode(t, call(t, cs2, "agora_dispatch_cancel", map[string]any{"id": slow.Dispatch.ID}), &c)
		if c.Dispatch.State != "cancelled" || !c.Dispatch.Done {
			t.Errorf("cancel = %+v", c.Dispatch)
		}
	}

	out := string(agora(t, home, nil, "audit", "log", "-o", "json"))
	if strings.Contains(out, secretCanary) {
		t.Error("the audit log holds the secret")
	}
	var entries []auditEntry
	json.Unmarshal([]byte(out), &entries)
	calls := 0
	for _, e := range entries {
		if e.Kind == entry.MCPToolCall {
			calls++
		}
	}
	if calls != 9 {
		t.Errorf("%d mcp.tool.call entries, want one per call (9)", calls)
	}
}

// actorOf is the name the stdio server records the test client by: the name it gave in
// initialize and the OS user running the server (before, the bare OS user).
func actorOf(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Skipf("SKIP: cannot tell the OS user: %v", err)
	}
	return "agora-test@" + strings.TrimSpace(string(out))
}
