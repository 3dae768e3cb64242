package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAttack_RevisionOverMCP: over the official SDK client against the real binary, an MCP
// client allowed main and release/* cannot reach a forbidden branch's commit by naming an
// allowed ref that does not exist in git describe's form (release/x-gHEX, which rev-parse
// reads as the abbreviated id HEX), nor by an abbreviated id or revision syntax: neither as
// agora_dispatch's revision nor as a plan's revision through agora_orchestrator_submit. Each
// is refused by name, no answer names the repository's path, and nothing is recorded.
func TestAttack_RevisionOverMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo, commits := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*")
	serveOrch(t, home)
	cmd := exec.Command(agoraBin, "mcp", "--ceiling", "orchestrate")
	cmd.Env = baseEnv(home)
	cs, err := newClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	secret := commits["feature/x"]
	var before []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &before)
	for _, tt := range []struct{ rev, want string }{
		{"release/x-g" + secret[:10], `revision "release/x-g` + secret[:10] + `" is neither a branch nor a tag`},
		{"release/1-g" + secret, "is neither a branch nor a tag"},
		{"release/" + secret[:12], "is neither a branch nor a tag"},
		{secret, "is not reachable from any branch or tag the workspace allows"},
		{"main^{/feature}", `argument "revision" is not a branch, tag or full commit id`},
		{"release/1@{-1}", `argument "revision" is not a branch, tag or full commit id`},
	} {
		res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer", "envs": []string{"demo"},
			"workspace": "app", "revision": tt.rev})
		if !res.IsError || !strings.Contains(text(res), tt.want) {
			t.Errorf("agora_dispatch at %q: got %q, want a refusal containing %q", tt.rev, text(res), tt.want)
		}
		if strings.Contains(text(res), repo) || strings.Contains(text(res), "secret-app") {
			t.Errorf("agora_dispatch at %q: the refusal names the repository: %s", tt.rev, text(res))
		}
	}
	var after []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &after)
	if len(after) != len(before) {
		t.Errorf("refused dispatches left %d records", len(after)-len(before))
	}

	for _, rev := range []string{"release/x-g" + secret[:10], "main-g" + secret[:7]} {
		plan := map[string]any{"version": 1, "name": "describe-attack", "workspace": "app", "revision": rev,
			"tasks": []any{map[string]any{"id": "a", "subagent": "writer", "env": []string{"demo"}}}}
		res := call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan})
		got := text(res)
		if !res.IsError || !strings.Contains(got, "is neither a branch nor a tag") && !strings.Contains(got, "is not allowed") {
			t.Errorf("a plan at %q: got %q, want it refused", rev, got)
		}
		if strings.Contains(got, secret) || strings.Contains(got, repo) || strings.Contains(got, "secret-app") {
			t.Errorf("a plan at %q: the answer names the commit or the repository: %s", rev, got)
		}
	}
	var runs []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "orch", "runs", "-o", "json"), &runs)
	if len(runs) != 0 {
		t.Errorf("refused plans left %d runs", len(runs))
	}
}

// TestAttack_RevisionSupersededWorkspaceOverMCP: an MCP client that saw a workspace's version
// in its own dispatch record (app@sha256:OLD) cannot keep using that version after people
// narrowed the workspace's revisions, as agora_dispatch's workspace or as a plan's, nor any
// version after they retired it: new work starts only from the workspace as registered now.
// The current version pinned by digest still works.
func TestAttack_RevisionSupersededWorkspaceOverMCP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo, commits := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "feature/*")
	serveOrch(t, home)
	cmd := exec.Command(agoraBin, "mcp", "--ceiling", "orchestrate")
	cmd.Env = baseEnv(home)
	cs, err := newClient().Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	dispatchAt := func(ws, rev string) *mcp.CallToolResult {
		return call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer", "envs": []string{"demo"},
			"workspace": ws, "revision": rev, "wait_seconds": 120})
	}
	var out dispatchOut
	decode(t, dispatchAt("app", "feature/x"), &out)
	old := out.Dispatch.Workspace
	if !strings.HasPrefix(old, "app@sha256:") || out.Dispatch.Revision != commits["feature/x"] {
		t.Fatalf("dispatch on feature/x = %+v", out.Dispatch)
	}

	// People narrow the workspace: feature branches are off limits from now on.
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main")
	for _, rev := range []string{"feature/x", commits["feature/x"], "main"} {
		res := dispatchAt(old, rev)
		if !res.IsError || !strings.Contains(text(res), "is not its current one") {
			t.Errorf("the superseded version %s at %q: got %.300s, want it refused", old, rev, text(res))
		}
	}
	plan := map[string]any{"version": 1, "name": "old-pin", "workspace": old, "revision": "feature/x",
		"tasks": []any{map[string]any{"id": "a", "subagent": "writer", "env": []string{"demo"}}}}
	if res := call(t, cs, "agora_orchestrator_submit", map[string]any{"plan": plan}); !res.IsError || !strings.Contains(text(res), "is not its current one") {
		t.Errorf("a plan on the superseded version: got %.300s, want it refused", text(res))
	}
	decode(t, dispatchAt("app", "main"), &out)
	cur := out.Dispatch.Workspace
	if cur == old || out.Dispatch.Revision != commits["main"] {
		t.Fatalf("dispatch on main = %+v", out.Dispatch)
	}
	decode(t, dispatchAt(cur, "main"), &out)
	if out.Dispatch.Workspace != cur {
		t.Errorf("the current version pinned: %+v", out.Dispatch)
	}

	// People retire it: no version of it starts work.
	src, _ := filepath.Abs("testdata/catalog/agora-manifest.yaml")
	agora(t, home, []string{"DEMO_TOKEN=" + secretCanary}, "apply", "-f", src, "--prune")
	for _, ref := range []string{old, cur, "app"} {
		if res := dispatchAt(ref, "main"); !res.IsError || !strings.Contains(text(res), `workspace "app" not found`) {
			t.Errorf("the retired workspace as %s: got %.300s, want it refused", ref, text(res))
		}
	}
	var runs []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "orch", "runs", "-o", "json"), &runs)
	if len(runs) != 0 {
		t.Errorf("refused plans left %d runs", len(runs))
	}
}

// TestAttack_RevisionOnTheCLI: the real binary, as a person or a script handed a revision
// would run it. A workspace revision in git describe's form reaches no commit; a repository
// revision that starts with '-' is refused before git runs, and one that hides an option after
// a space, a tab or a newline names no commit and makes git write nothing; a plan file naming
// a describe-like revision or a superseded workspace version is refused at submit.
func TestAttack_RevisionOnTheCLI(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo, commits := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*")
	secret := commits["feature/x"]
	written := filepath.Join(t.TempDir(), "written")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--workspace", "app@release/x-g" + secret[:10]}, "is neither a branch nor a tag"},
		{[]string{"--workspace", "app@release/1-g" + secret}, "is neither a branch nor a tag"},
		{[]string{"--repo", repo + "@--output=" + written}, "may not start with '-'"},
		{[]string{"--repo", repo + "@--upload-pack=touch " + written}, "may not start with '-'"},
		{[]string{"--repo", repo + "@ --output=" + written}, "not found"},
		{[]string{"--repo", repo + "@\t--output=" + written}, "not found"},
		{[]string{"--repo", repo + "@main --output=" + written}, "not found"},
		{[]string{"--repo", repo + "@main\n--output=" + written}, "not found"},
	} {
		msg, code := cliError(t, home, append([]string{"dispatch", "run", "--subagent", "writer", "--env", "demo"}, tt.args...)...)
		if code == 0 || !strings.Contains(msg, tt.want) {
			t.Errorf("dispatch run %q: exit %d, %q; want an error containing %q", tt.args, code, msg, tt.want)
		}
		if !strings.Contains(strings.Join(tt.args, " "), secret) && strings.Contains(msg, secret) {
			t.Errorf("dispatch run %q: the error names the forbidden commit: %s", tt.args, msg)
		}
	}
	if _, err := os.Stat(written); err == nil {
		t.Error("a revision made git write a file")
	}
	var list []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &list)
	if len(list) != 0 {
		t.Errorf("refused dispatches left %d records", len(list))
	}

	serveOrch(t, home)
	old := strings.TrimSpace(string(agora(t, home, nil, "workspace", "show", "app", "-o", "json")))
	var shown struct{ Digest string }
	if err := json.Unmarshal([]byte(old), &shown); err != nil || shown.Digest == "" {
		t.Fatalf("workspace show: %v\n%s", err, old)
	}
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main")
	dir := t.TempDir()
	for _, tt := range []struct{ ws, rev, want string }{
		{"app", "release/x-g" + secret[:10], "is not allowed"},
		{"app", "main-g" + secret[:10], "is not allowed"},
		{"app@" + shown.Digest, "release/1", "is not its current one"},
	} {
		p := filepath.Join(dir, "plan.yaml")
		os.WriteFile(p, []byte("version: 1\nname: attack\nworkspace: '"+tt.ws+"'\nrevision: '"+tt.rev+"'\ntasks: [{id: a, subagent: writer, env: [demo]}]\n"), 0o644)
		msg, code := cliError(t, home, "orch", "submit", p)
		if code == 0 || !strings.Contains(msg, tt.want) {
			t.Errorf("orch submit with workspace %s at %q: exit %d, %q; want an error containing %q", tt.ws, tt.rev, code, msg, tt.want)
		}
	}
}
