package gitbranch_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitbranch"
)

// TestRedTeam29_ModeAndRenameAreChanges: the check that gives a
// change no commit when it changes nothing must not be fooled into dropping real work: the
// same content edit plus a mode change (chmod +x), or plus a rename, changes the tree and gets
// its commit; only the edit made a third time, on top of all of it, is unchanged. Every commit
// on the branch changes its tree.
func TestRedTeam29_ModeAndRenameAreChanges(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"shared.txt": lines, "old.txt": "moved\n"})
	edit := func(d string) { write(d, "shared.txt", strings.Replace(lines, "two", "TWO", 1)) }
	chmod := func(d string) {
		edit(d)
		if err := os.Chmod(filepath.Join(d, "shared.txt"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rename := func(d string) {
		edit(d)
		if err := os.Rename(filepath.Join(d, "old.txt"), filepath.Join(d, "new.txt")); err != nil {
			t.Fatal(err)
		}
	}
	changes := []gitbranch.Change{
		{Label: "task edit", Author: sig("fixer"), Message: "edit\n", Patch: patchOf(t, dir, base, edit)},
		{Label: "task chmod", Author: sig("fixer"), Message: "chmod\n", Patch: patchOf(t, dir, base, chmod)},
		{Label: "task rename", Author: sig("fixer"), Message: "rename\n", Patch: patchOf(t, dir, base, rename)},
		{Label: "task again", Author: sig("fixer"), Message: "again\n", Patch: patchOf(t, dir, base, edit)},
	}
	res, err := gitbranch.Create(t.Context(), "agora/modes", gitbranch.Options{Repo: dir, Base: base, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 3 || !slices.Equal(res.Unchanged, []string{"task again"}) {
		t.Errorf("got %d commits, unchanged %q; want 3 commits (edit, chmod, rename) and only task again unchanged", len(res.Commits), res.Unchanged)
	}
	if log := git(t, dir, "log", "--reverse", "--format=%s", "agora/modes", "^"+base); log != "edit\nchmod\nrename" {
		t.Errorf("git log = %q, want edit, chmod, rename", log)
	}
	if mode := git(t, dir, "ls-tree", "agora/modes", "shared.txt"); !strings.HasPrefix(mode, "100755 ") {
		t.Errorf("the branch lost the mode change: %q", mode)
	}
	if files := git(t, dir, "ls-tree", "--name-only", "agora/modes"); files != "new.txt\nshared.txt" {
		t.Errorf("the branch's files = %q, want the rename kept", files)
	}
	for _, c := range res.Commits {
		if git(t, dir, "rev-parse", c+"^{tree}") == git(t, dir, "rev-parse", c+"^^{tree}") {
			t.Errorf("commit %s is empty", c)
		}
	}
}
