package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gitRepo makes a repository with main, release/1 and feature/x and returns its path and the
// commit of each.
func gitRepo(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secret-app")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	os.MkdirAll(dir, 0o755)
	git("init", "-q", "-b", "main")
	commits := map[string]string{}
	for _, b := range []string{"main", "release/1", "feature/x"} {
		if b != "main" {
			git("checkout", "-q", "-b", b, "main")
		}
		os.WriteFile(filepath.Join(dir, "BRANCH"), []byte(b+"\n"), 0o644)
		git("add", "BRANCH")
		git("commit", "-q", "-m", b)
		commits[b] = git("rev-parse", "HEAD")
	}
	git("checkout", "-q", "main")
	return dir, commits
}

// TestDispatchWorkspace_OverStdio: over the official SDK client against the real binary,
// tools/list names the registered workspaces and their revisions (never the path), a dispatch
// names a workspace at a revision and gets back a record with the workspace version and the
// commit but no host path; a revision outside the patterns and an unknown workspace are
// refused by name, and nothing is recorded for them.
func TestDispatchWorkspace_OverStdio(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo, commits := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main", "--revision", "release/*",
		"--description", "the application")
	cs := stdioSession(t, home)

	var schema []byte
	for tl, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tl.Name == "agora_dispatch" {
			if schema, err = json.Marshal(tl.InputSchema); err != nil {
				t.Fatal(err)
			}
		}
	}
	var s struct {
		Properties map[string]struct {
			Enum        []string `json:"enum"`
			Description string   `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	ws := s.Properties["workspace"]
	if !slices.Equal(ws.Enum, []string{"app"}) || !strings.Contains(ws.Description, "app (revisions main, release/*): the application") {
		t.Errorf("workspace schema = %+v", ws)
	}
	if strings.Contains(string(schema), repo) || strings.Contains(string(schema), "secret-app") {
		t.Errorf("the published schema names the repository path: %s", schema)
	}

	var out dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{
		"subagent": "writer", "envs": []string{"demo"}, "workspace": "app", "revision": "release/1", "wait_seconds": 120,
	}), &out)
	r := out.Dispatch
	if r.State != "finished" || !strings.HasPrefix(r.Workspace, "app@sha256:") || r.Revision != commits["release/1"] || r.Patch == nil {
		t.Fatalf("dispatch = %+v", r)
	}
	var desc dispatchOut
	res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": r.ID})
	decode(t, res, &desc)
	if desc.Dispatch.Workspace != r.Workspace || desc.Dispatch.Revision != r.Revision {
		t.Errorf("describe = %+v", desc.Dispatch)
	}
	for _, res := range []*mcp.CallToolResult{res} {
		if strings.Contains(text(res), repo) || strings.Contains(text(res), "secret-app") {
			t.Errorf("describe names the repository path: %s", text(res))
		}
	}
	// The host side keeps the path: the CLI shows it to the operator.
	if host := agora(t, home, nil, "dispatch", "describe", r.ID); !strings.Contains(string(host), repo) {
		t.Errorf("agora dispatch describe lacks the repository:\n%s", host)
	}

	refused := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"subagent": "writer", "workspace": "app", "revision": "feature/x"},
			`agora_dispatch refused: workspace "app": revision "feature/x" is not allowed; allowed revisions: main, release/*`},
		{map[string]any{"subagent": "writer", "workspace": "app", "revision": commits["feature/x"]},
			"is not reachable from any branch or tag the workspace allows; allowed revisions: main, release/*"},
		{map[string]any{"subagent": "writer", "workspace": "nope"}, `agora_dispatch refused: workspace "nope" not found; known: app`},
		{map[string]any{"subagent": "writer", "workspace": "app", "revision": "main~1"}, `argument "revision" is not a branch, tag or full commit id`},
		{map[string]any{"subagent": "writer", "workspace": "app", "revision": "--upload-pack=x"}, `argument "revision" is not a branch, tag or full commit id`},
		{map[string]any{"subagent": "writer", "workspace": "../app"}, `argument "workspace" holds a reference that is not NAME`},
		{map[string]any{"subagent": "writer", "revision": "main"}, `argument "revision" needs a workspace`},
		{map[string]any{"subagent": "writer", "repo": repo}, `unknown argument "repo"`},
	}
	var before []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &before)
	for _, tt := range refused {
		res := call(t, cs, "agora_dispatch", tt.args)
		if !res.IsError || !strings.Contains(text(res), tt.want) {
			t.Errorf("%v: got %q, want an error containing %q", tt.args, text(res), tt.want)
		}
		if strings.Contains(text(res), repo) {
			t.Errorf("%v: the refusal names the repository path: %s", tt.args, text(res))
		}
	}
	var after []json.RawMessage
	json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &after)
	if len(after) != len(before) {
		t.Errorf("refused dispatches left %d records", len(after)-len(before))
	}
}
