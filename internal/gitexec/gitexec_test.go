package gitexec_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitexec"
)

func TestCommand_StaysInTheRepositoryAndRunsNothing(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	hook := "#!/bin/sh\necho ran > " + marker + "\n"
	os.WriteFile(filepath.Join(repo, ".git", "hooks", "reference-transaction"), []byte(hook), 0o755)
	os.WriteFile(filepath.Join(repo, ".git", "fsmon.sh"), []byte(hook), 0o755)
	if out, err := exec.Command("git", "-C", repo, "config", "core.fsmonitor", filepath.Join(repo, ".git", "fsmon.sh")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	tree := "4b825dc642cb6eb9a060e54bf8d69288fbee4904" // the empty tree
	cmd := gitexec.Command(t.Context(), repo, "commit-tree", tree, "-m", "x")
	cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := gitexec.Command(t.Context(), repo, "update-ref", "refs/heads/x", strings.TrimSpace(string(out))).Run(); err != nil {
		t.Fatal(err)
	}
	if err := gitexec.Command(t.Context(), repo, "status").Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a hook or the fsmonitor ran")
	}
	// A directory inside the repository is not a repository: discovery stops there.
	sub := filepath.Join(repo, "sub")
	os.Mkdir(sub, 0o755)
	if err := gitexec.Command(t.Context(), sub, "rev-parse", "--git-dir").Run(); err == nil {
		t.Error("git found the enclosing repository from a subdirectory")
	}
	for _, kv := range []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME=/nonexistent"} {
		if !strings.Contains(strings.Join(gitexec.Env(repo), "\n"), kv) {
			t.Errorf("env lacks %s", kv)
		}
	}
}
