package gitexec_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitexec"
)

func TestCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	repo := t.TempDir()
	git := func(args ...string) string {
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
	git("commit", "-q", "--allow-empty", "-m", "one")
	head := git("rev-parse", "HEAD")
	git("tag", "-a", "-m", "annotated", "v1")
	tagID := git("rev-parse", "v1")
	tree := git("rev-parse", "HEAD^{tree}")
	for _, c := range []struct {
		name, rev, want string
	}{
		{"HEAD", "HEAD", head},
		{"branch", "main", head},
		{"full ref", "refs/heads/main", head},
		{"annotated tag, peeled", "v1", head},
		{"full commit id", head, head},
		{"a tag's id peels to its commit", tagID, head},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := gitexec.Commit(t.Context(), repo, c.rev)
			if err != nil || got != c.want {
				t.Errorf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	for _, c := range []struct {
		name, rev string
		refused   bool // before git runs
	}{
		{"empty", "", true},
		{"an option", "--upload-pack=touch /tmp/agora-pwned", true},
		{"a short option", "-h", true},
		{"unknown", "nope", false},
		{"a tree", tree, false},
		{"revision syntax that names no commit", "main^{tree}", false},
		{"an option after a space", "main --output=/tmp/agora-pwned", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := gitexec.Commit(t.Context(), repo, c.rev)
			if err == nil {
				t.Fatalf("got %q, want an error", got)
			}
			var refused *gitexec.RefusedRevisionError
			if errors.As(err, &refused) != c.refused || (!c.refused && !errors.Is(err, gitexec.ErrNoCommit)) {
				t.Errorf("got %v; want refused %v, else ErrNoCommit", err, c.refused)
			}
			if strings.Contains(err.Error(), repo) {
				t.Errorf("the error names the repository: %v", err)
			}
		})
	}
}

func TestResolveCommit_AsksGitOnceAndChecksTheAnswer(t *testing.T) {
	id := strings.Repeat("a", 40)
	for _, c := range []struct {
		name, out string
		ok        bool
	}{
		{"sha1", id + "\n", true},
		{"sha256", strings.Repeat("b", 64) + "\n", true},
		{"abbreviated", "aaaaaaa\n", false},
		{"upper case", strings.ToUpper(id) + "\n", false},
		{"two lines", id + "\n" + id + "\n", false},
		{"empty", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var argv [][]string
			got, err := gitexec.ResolveCommit("v1", func(args ...string) ([]byte, error) {
				argv = append(argv, args)
				return []byte(c.out), nil
			})
			want := []string{"rev-parse", "--verify", "--quiet", "--end-of-options", "v1^{commit}"}
			if len(argv) != 1 || !slices.Equal(argv[0], want) {
				t.Errorf("git ran %q, want once with %q", argv, want)
			}
			if (err == nil) != c.ok || (c.ok && got != strings.TrimSpace(c.out)) {
				t.Errorf("got %q, %v; want ok %v", got, err, c.ok)
			}
		})
	}
}
