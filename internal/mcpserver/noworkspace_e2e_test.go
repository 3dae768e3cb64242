package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoWorkspace_Explained: the server's instructions say what a workspace
// is and how to pass one, and an agent that fails because it started in an empty directory
// (no workspace given: the file it opens is not there, a bare FileNotFoundError for a Python
// agent) is answered with a note that says so and names the registered workspaces; the same
// agent on a workspace succeeds.
func TestNoWorkspace_Explained(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	dir := t.TempDir()
	for p, s := range map[string]string{
		"caps/sh/capability.yaml": "commands: [\"sh -c *\"]\n",
		"agora-manifest.yaml": "version: 1\ncapabilities:\n  - {name: sh, from: caps/sh}\nsubagents:\n" +
			"  - name: branch-reader\n    capabilities: [sh]\n    command: [sh, -c, 'cat BRANCH']\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agora(t, home, nil, "apply", "-f", filepath.Join(dir, "agora-manifest.yaml"))
	repo, _ := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main")
	cs := stdioSession(t, home)

	ins := cs.InitializeResult().Instructions
	for _, want := range []string{"workspace", "agora_dispatch's workspace argument", "agora workspace register", "empty directory"} {
		if !strings.Contains(ins, want) {
			t.Errorf("the instructions lack %q:\n%s", want, ins)
		}
	}

	var bare dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "branch-reader", "wait_seconds": 120}), &bare)
	if bare.Dispatch.State != "failed" || bare.Dispatch.Reason != "worker-failed" {
		t.Fatalf("branch-reader without a workspace: %+v", bare.Dispatch)
	}
	for _, want := range []string{"without a workspace", "empty directory", `"workspace": NAME (registered: app)`} {
		if !strings.Contains(bare.Note, want) {
			t.Errorf("the failed dispatch's note lacks %q: %q", want, bare.Note)
		}
	}
	var desc dispatchOut
	decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": bare.Dispatch.ID}), &desc)
	if !strings.Contains(desc.Note, "without a workspace") {
		t.Errorf("describe's note lacks the workspace explanation: %q", desc.Note)
	}

	var ok dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "branch-reader", "workspace": "app", "wait_seconds": 120}), &ok)
	if ok.Dispatch.State != "finished" || strings.Contains(ok.Note, "workspace") {
		t.Errorf("branch-reader on workspace app: %+v, note %q", ok.Dispatch, ok.Note)
	}
}
