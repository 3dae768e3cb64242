package dispatch_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// subagentWith registers an exec subagent running script with the named capabilities.
func (e *env) subagentWith(name, script string, caps ...string) error {
	e.t.Helper()
	p, err := e.w.PrepareSubagent(e.t.Context(), name, provision.SubagentSpec{
		Command: []string{"sh", "-c", script}, Capabilities: caps,
	}, nil, nil)
	if err != nil {
		return err
	}
	_, _, err = e.w.Register(e.t.Context(), "test", "register", p)
	return err
}

func (e *env) patch(r *dispatch.Record) string {
	e.t.Helper()
	if r.Result == nil || r.Result.Patch == nil {
		e.t.Fatalf("dispatch %s (%s %s: %s) has no patch", r.ID, r.State, r.Reason, r.Detail)
	}
	b, err := e.home.Blobs.Get(r.Result.Patch.Digest, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// The README's case: a capability that ships README.md no longer replaces the repository's,
// its files are at $AGORA_CAPABILITIES/NAME, read-only, and the patch applies to the repo.
func TestDispatch_CapabilityFilesMountedReadOnly(t *testing.T) {
	e := newEnv(t)
	repo := t.TempDir()
	gitT(t, repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("the repository's readme\n"), 0o644)
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-qm", "init")
	e.capability("repo-tools", "commands: [\"sh -c *\"]\n", map[string]string{
		"README.md": "how to use repo-tools\n",
		"fix.sh":    "#!/bin/sh\necho fixed >> README.md\n",
	}, "fix.sh")
	script := `set -u
cat "$AGORA_CAPABILITIES/repo-tools/README.md"
if echo x > "$AGORA_CAPABILITIES/repo-tools/README.md"; then echo WROTE-FILE; fi
if touch "$AGORA_CAPABILITIES/repo-tools/new"; then echo WROTE-DIR; fi
if chmod 0777 "$AGORA_CAPABILITIES/repo-tools/fix.sh"; then echo CHMOD; fi
if rm -rf "$AGORA_CAPABILITIES/repo-tools"; then echo REMOVED; fi
"$AGORA_CAPABILITIES/repo-tools/fix.sh"`
	if err := e.subagentWith("fixer", script, "repo-tools"); err != nil {
		t.Fatal(err)
	}
	rec := e.run(dispatch.Request{Subagent: "fixer", Repo: repo})
	if rec.State != lifecycle.DispatchFinished {
		t.Fatalf("got %s %s %q", rec.State, rec.Reason, rec.Detail)
	}
	out := e.stdout(rec)
	if !strings.Contains(out, "how to use repo-tools") {
		t.Errorf("the agent did not read the capability's README at $AGORA_CAPABILITIES: %q", out)
	}
	for _, w := range []string{"WROTE-FILE", "WROTE-DIR", "CHMOD", "REMOVED"} {
		if strings.Contains(out, w) {
			t.Errorf("the agent changed the read-only capability files (%s): %q", w, out)
		}
	}
	patch := e.patch(rec)
	if strings.Contains(patch, "how to use repo-tools") || strings.Contains(patch, "fix.sh") {
		t.Errorf("capability files leaked into the patch:\n%s", patch)
	}
	cmd := exec.Command("git", "apply", "--check", "-")
	cmd.Dir, cmd.Stdin = repo, strings.NewReader(patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the patch does not apply to the repository: %v\n%s\n%s", err, out, patch)
	}
	if !strings.Contains(patch, "+fixed") {
		t.Errorf("want the script's edit of the repository's README in the patch:\n%s", patch)
	}
}

func TestAccept_OverlayRefusedBeforeTheRecord(t *testing.T) {
	e := newEnv(t)
	repo := t.TempDir()
	gitT(t, repo, "init", "-q", "-b", "main")
	os.MkdirAll(filepath.Join(repo, "docs"), 0o755)
	os.WriteFile(filepath.Join(repo, "CLAUDE.md"), []byte("the repository's\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "docs", "x.md"), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "notes"), []byte("a file\n"), 0o644)
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-qm", "init")
	e.capability("claude-md", "overlay: [CLAUDE.md]\n", map[string]string{"CLAUDE.md": "ours\n"})
	e.capability("docs-dir", "overlay: [\"docs\"]\n", map[string]string{"docs": "a file over a directory\n"})
	e.capability("under-file", "overlay: [\"notes/**\"]\n", map[string]string{"notes/a.md": "x\n"})
	e.capability("settings", "overlay: [\".claude/**\"]\n", map[string]string{".claude/settings.json": "{}\n"})
	e.capability("settings2", "overlay: [\".claude/**\"]\n", map[string]string{".claude/settings.json": "[]\n"})
	for _, s := range []string{"claude-md", "docs-dir", "under-file", "settings"} {
		if err := e.subagentWith("with-"+s, "true", "shell", s); err != nil {
			t.Fatal(err)
		}
	}
	before, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for sub, want := range map[string]string{
		"with-claude-md":  `capability "claude-md" overlays CLAUDE.md, which repository ` + repo,
		"with-docs-dir":   `capability "docs-dir" overlays docs, which repository`,
		"with-under-file": `capability "under-file" overlays notes/a.md, but repository ` + repo,
	} {
		_, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: sub, Repo: repo, Actor: "test"})
		var re *dispatch.RequestError
		var oe *dispatch.OverlayError
		if !errors.As(err, &re) || !errors.As(err, &oe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an OverlayError containing %q", sub, err, want)
		}
	}
	after, err := e.d.Records.List(t.Context(), dispatch.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("a refused overlay wrote a record: %d records, want %d", len(after), len(before))
	}
	// A path the repository does not have is fine, and never in the patch.
	if rec := e.run(dispatch.Request{Subagent: "with-settings", Repo: repo}); rec.State != lifecycle.DispatchFinished || e.patch(rec) != "" {
		t.Errorf("an overlay of a new path: %s %s %q", rec.State, rec.Reason, rec.Detail)
	}
	// Two capabilities of one subagent overlaying one path are refused at registration.
	err = e.subagentWith("both", "true", "settings", "settings2")
	if err == nil || !strings.Contains(err.Error(), `capabilities "settings" and "settings2" both overlay .claude/settings.json`) {
		t.Errorf("registration with a clash: got %v", err)
	}
}
