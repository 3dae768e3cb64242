package dispatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedTeam35_RepositoryRunsNothing: in the cluster the repositories sit on agora's volume
// (deploy/kubernetes: /var/lib/agora/repos) and git runs in the serve pod, beside its keys and
// service account token. Attack: a source repository whose .git/config names programs at every
// point git could run one while agora makes a workspace from it (every hook, the fsmonitor, a
// filter driver and a textconv the committed .gitattributes selects, upload-pack's
// pack-objects hook, an ssh command), and whose tree holds a symlink to the home. Making the
// workspace must run none of them, check the blob out as committed (no smudge), and leave the
// symlink a link.
func TestRedTeam35_RepositoryRunsNothing(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	repo, marker := t.TempDir(), filepath.Join(t.TempDir(), "ran")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("committed\n"), 0o644)
	os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("* filter=evil diff=evil\n"), 0o644)
	os.Symlink("/var/lib/agora/home/keys/secret.key", filepath.Join(repo, "leak"))
	run("add", "-A")
	run("commit", "-q", "-m", "x")
	commit := run("rev-parse", "HEAD")

	prog := filepath.Join(repo, ".git", "evil.sh")
	os.WriteFile(prog, []byte("#!/bin/sh\necho \"$0 $*\" >> "+marker+"\ncat\n"), 0o755)
	for _, h := range []string{"post-checkout", "post-merge", "reference-transaction", "pre-auto-gc", "post-index-change", "fsmonitor-watchman"} {
		os.WriteFile(filepath.Join(repo, ".git", "hooks", h), []byte("#!/bin/sh\necho "+h+" >> "+marker+"\n"), 0o755)
	}
	for k, v := range map[string]string{
		"core.fsmonitor": prog, "filter.evil.smudge": prog, "filter.evil.clean": prog, "filter.evil.process": prog,
		"diff.evil.textconv": prog, "uploadpack.packObjectsHook": prog, "core.sshCommand": prog,
		"core.hooksPath": filepath.Join(repo, ".git", "hooks"), "protocol.allow": "always",
	} {
		run("config", k, v)
	}

	stateDir := t.TempDir()
	s := stageAt(stateDir, "d1")
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &Record{Repo: repo, Revision: commit}
	if err := prepareWorkspace(t.Context(), r, s, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("making the workspace ran the repository's programs:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(s.workspace, "a.txt")); err != nil || string(b) != "committed\n" {
		t.Errorf("a.txt in the workspace: %q, %v; want the blob as committed", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(s.workspace, "leak")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the committed symlink is not a link in the workspace: %v, %v", fi, err)
	}
}
