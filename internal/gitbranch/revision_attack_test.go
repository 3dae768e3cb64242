package gitbranch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitbranch"
)

// TestAttack_RevisionBaseIsTheCommitItself: a branch is built only on a base that is, by its
// full id, a commit of the repository itself: not a tag object's id (it peels to another), a
// tree's or a blob's, not an uppercase or SHA-256-length spelling, not a commit that only
// another repository holds, and not a name in git describe's form. Nothing is created for any.
func TestAttack_RevisionBaseIsTheCommitItself(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"f": "x\n"})
	git(t, dir, "tag", "-a", "-m", "t", "v1")
	other, otherBase := repo(t, map[string]string{"g": "secret\n"})
	git(t, other, "commit", "-q", "--allow-empty", "-m", "only in the other repository")
	for what, b := range map[string]string{
		"tag object":    git(t, dir, "rev-parse", "v1"),
		"tree":          git(t, dir, "rev-parse", "main^{tree}"),
		"blob":          git(t, dir, "rev-parse", "main:f"),
		"uppercase":     strings.ToUpper(base),
		"sha-256 width": base + strings.Repeat("0", 24),
		"other repo":    git(t, other, "rev-parse", "HEAD"),
		"other base":    otherBase,
		"describe name": "x-g" + base[:12],
		"option":        "--output=" + dir + "/x",
	} {
		if what == "other base" && otherBase == base {
			continue // the same tree and times made the same commit
		}
		if _, err := gitbranch.Create(t.Context(), "agora/attack", gitbranch.Options{Repo: dir, Base: b}); err == nil {
			t.Errorf("%s base %q accepted", what, b)
		}
		if _, err := gitbranch.Combined(t.Context(), gitbranch.Options{Repo: dir, Base: b}); err == nil {
			t.Errorf("%s base %q accepted for a combined patch", what, b)
		}
	}
	if refs := git(t, dir, "for-each-ref", "--format=%(refname)", "refs/heads/agora"); refs != "" {
		t.Errorf("refused bases left refs: %s", refs)
	}
}
