package gitbranch_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitbranch"
)

// TestCreate_SameEditTwiceMakesNoEmptyCommit: two tasks that made the same edit give one
// commit; the second, which changes nothing on top of the first, gets none and is named in
// Unchanged (it was an empty commit).
func TestCreate_SameEditTwiceMakesNoEmptyCommit(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"shared.txt": lines})
	same := patchOf(t, dir, base, func(d string) { write(d, "shared.txt", strings.Replace(lines, "two", "TWO", 1)) })
	changes := []gitbranch.Change{
		{Label: "task a", Author: sig("fixer"), Message: "task a\n", Patch: same},
		{Label: "task b", Author: sig("fixer"), Message: "task b\n", Patch: same},
		{Label: "task c", Author: sig("fixer"), Message: "task c\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "c.txt", "c\n") })},
	}
	res, err := gitbranch.Create(t.Context(), "agora/same", gitbranch.Options{Repo: dir, Base: base, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 2 || !slices.Equal(res.Unchanged, []string{"task b"}) {
		t.Errorf("got %d commits, unchanged %q; want 2 commits and task b unchanged", len(res.Commits), res.Unchanged)
	}
	if log := git(t, dir, "log", "--reverse", "--format=%s", "agora/same", "^"+base); log != "task a\ntask c" {
		t.Errorf("git log = %q, want task a then task c", log)
	}
	// Every commit on the branch changes something.
	for _, c := range res.Commits {
		if git(t, dir, "rev-parse", c+"^{tree}") == git(t, dir, "rev-parse", c+"^^{tree}") {
			t.Errorf("commit %s is empty", c)
		}
	}
}
