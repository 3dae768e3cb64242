package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/toolreg"
)

// TestRedTeam4_WriteFileNeverIntoGit: write_file refuses every way into
// a .git directory, spelled in the path or reached through a link a repository committed,
// and leaves what is there untouched; a link elsewhere in the workspace still writes.
// Failed before: each of these wrote .git/config (core.fsmonitor there is a command every
// granted `git status` runs).
func TestRedTeam4_WriteFileNeverIntoGit(t *testing.T) {
	f := newFixture(t, allTools)
	git := filepath.Join(f.ws, ".git")
	mustDo(t, os.MkdirAll(filepath.Join(git, "hooks"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(git, "config"), []byte("[core]\n"), 0o644))
	mustDo(t, os.Symlink(".git/config", filepath.Join(f.ws, "cfg")))
	mustDo(t, os.Symlink(".git", filepath.Join(f.ws, "meta")))
	mustDo(t, os.Symlink(".git/hooks/pre-commit", filepath.Join(f.ws, "dangling")))
	mustDo(t, os.MkdirAll(filepath.Join(f.ws, "docs"), 0o755))
	mustDo(t, os.Symlink("docs", filepath.Join(f.ws, "d")))
	for _, p := range []string{".git/config", ".git/hooks/pre-commit", "sub/.git/config", ".GIT/config", "cfg", "meta/config", "meta/hooks/post-checkout", "dangling"} {
		t.Run(p, func(t *testing.T) {
			_, err := f.call(t, "write_file", map[string]any{"path": p, "content": "[core]\n\tfsmonitor = \"touch PWNED\"\n"})
			var de *toolreg.DeniedError
			if !errors.As(err, &de) || de.Reason != ReasonGitDir {
				t.Fatalf("write_file %q: %v, want refused as %q", p, err, ReasonGitDir)
			}
			if b, _ := os.ReadFile(filepath.Join(git, "config")); string(b) != "[core]\n" {
				t.Errorf(".git/config is now %q", b)
			}
			for _, made := range []string{filepath.Join(git, "hooks", "pre-commit"), filepath.Join(f.ws, "sub"), filepath.Join(git, "hooks", "post-checkout")} {
				if _, err := os.Lstat(made); err == nil {
					t.Errorf("%s was created", made)
				}
			}
		})
	}
	if _, err := f.call(t, "write_file", map[string]any{"path": "d/a.md", "content": "x"}); err != nil {
		t.Errorf("a write through a link inside the workspace: %v", err)
	}
}
