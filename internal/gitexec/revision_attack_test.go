package gitexec_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitexec"
)

// attackRepo is a repository with main, a branch secret (deleted after its commit, so only the
// reflog keeps it) and the annotated tag v1 on main; it returns the directory, git in it, and
// main's and the secret commit's ids.
func attackRepo(t *testing.T) (repo string, git func(...string) string, main, secret string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	repo = filepath.Join(t.TempDir(), "repo")
	os.Mkdir(repo, 0o755)
	git = func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = append(gitexec.Env(repo), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "one in "+repo)
	main = git("rev-parse", "HEAD")
	git("tag", "-a", "-m", "annotated", "v1")
	git("checkout", "-q", "-b", "secret")
	git("commit", "-q", "--allow-empty", "-m", "secret in "+repo)
	secret = git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	git("branch", "-q", "-D", "secret")
	return repo, git, main, secret
}

// TestAttack_RevisionRefCommitIsExact: RefCommit resolves only a ref that exists under exactly
// the name given: not git describe's NAME-gHEX (which rev-parse takes for the abbreviated id
// HEX), not a short name, not revision syntax, not an option.
func TestAttack_RevisionRefCommitIsExact(t *testing.T) {
	repo, git, main, secret := attackRepo(t)
	for _, c := range []struct{ ref, want string }{
		{"refs/heads/main", main},
		{"refs/tags/v1", main},
	} {
		if got, err := gitexec.RefCommit(t.Context(), repo, c.ref); err != nil || got != c.want {
			t.Errorf("RefCommit(%s) = %q, %v; want %s", c.ref, got, err, c.want)
		}
	}
	// rev-parse does hand out the secret commit for a describe-like name: the hole RefCommit
	// closes.
	if got, err := gitexec.Commit(t.Context(), repo, "refs/heads/x-g"+secret[:7]); err != nil || got != secret {
		t.Logf("git no longer reads refs/heads/x-gHEX as an abbreviation (got %q, %v)", got, err)
	}
	git("update-ref", "refs/tags/tree", git("rev-parse", "main^{tree}"))
	for _, ref := range []string{
		"refs/heads/x-g" + secret[:7], "refs/tags/v1-g" + secret, "refs/heads/main-g" + secret[:4],
		"refs/heads/" + secret[:7], "refs/heads/" + secret, "refs/heads/main^0", "refs/heads/main~0", "refs/heads/main@{1}",
		"refs/heads", "refs/heads/", "refs/heads/ma", "refs/tags/tree", "refs/heads/main:", "refs/heads/main\n",
	} {
		got, err := gitexec.RefCommit(t.Context(), repo, ref)
		if err == nil || !errors.Is(err, gitexec.ErrNoCommit) {
			t.Errorf("RefCommit(%q) = %q, %v; want ErrNoCommit", ref, got, err)
		}
	}
	for _, ref := range []string{"", "main", "HEAD", secret, "-", "--all", "--upload-pack=touch x", " refs/heads/main", "heads/main"} {
		got, err := gitexec.RefCommit(t.Context(), repo, ref)
		if !errors.As(err, new(*gitexec.RefusedRevisionError)) {
			t.Errorf("RefCommit(%q) = %q, %v; want it refused before git runs", ref, got, err)
		}
	}
}

// TestAttack_RevisionOptionInjection: a person's revision never reaches git as an option: a
// leading '-' is refused, and whatever else starts with space, tab or follows a space, and NUL
// or newline inside, is one revision after --end-of-options that names no commit. Nothing is
// written, and no error names the repository.
func TestAttack_RevisionOptionInjection(t *testing.T) {
	repo, _, _, _ := attackRepo(t)
	out := filepath.Join(t.TempDir(), "written")
	for _, rev := range []string{
		"-", "--", "--end-of-options", "--output=" + out, "--upload-pack=touch " + out, "-o" + out, "--git-dir=/",
		" --output=" + out, "\t--output=" + out, "\n--output=" + out, "main --output=" + out, "main\x00--output=" + out,
		"main\nHEAD", "main\x00", strings.Repeat("x", 1<<16), "main^{/" + strings.Repeat("(a*)*", 200) + "b}",
	} {
		got, err := gitexec.Commit(t.Context(), repo, rev)
		if err == nil {
			t.Errorf("Commit(%.40q) = %s; want an error", rev, got)
			continue
		}
		if strings.Contains(err.Error(), repo) {
			t.Errorf("Commit(%.40q): the error names the repository: %.200v", rev, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a revision made git write a file")
	}
}

// TestAttack_RevisionCallerEnvironment: GIT_* variables in agora's environment (another
// repository's GIT_DIR, object directory or alternates, config given on the environment) do
// not reach the git that Commit runs.
func TestAttack_RevisionCallerEnvironment(t *testing.T) {
	repo, _, main, _ := attackRepo(t)
	other, _, otherMain, otherSecret := attackRepo(t)
	ran := filepath.Join(t.TempDir(), "ran")
	for k, v := range map[string]string{
		"GIT_DIR": filepath.Join(other, ".git"), "GIT_WORK_TREE": other,
		"GIT_OBJECT_DIRECTORY":             filepath.Join(other, ".git", "objects"),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES": filepath.Join(other, ".git", "objects"),
		"GIT_CONFIG_COUNT":                 "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "touch " + ran,
		"GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='touch " + ran + "'", "GIT_NAMESPACE": "x",
	} {
		t.Setenv(k, v)
	}
	if got, err := gitexec.Commit(t.Context(), repo, "main"); err != nil || got != main {
		t.Errorf("main = %s, %v; want %s", got, err, main)
	}
	for _, id := range []string{otherMain, otherSecret} {
		if got, err := gitexec.Commit(t.Context(), repo, id); err == nil {
			t.Errorf("the other repository's commit %s resolved to %s", id, got)
		}
	}
	if _, err := gitexec.RefCommit(t.Context(), repo, "refs/heads/main"); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a program named in the environment's git config ran")
	}
}
