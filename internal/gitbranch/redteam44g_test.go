package gitbranch_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/gitbranch"
)

// TestRedTeam44G_BranchIsTheTreeTheGateRan: a forged patch whose index line names another
// preimage blob than the base holds (an older version of the file, which the repository's
// history keeps) applies cleanly to the base as it is. The verify gate runs the tree of that
// plain application (git apply --cached); git's --3way, which newer gits try first, instead
// applies the hunk to the named blob and merges the result onto the base, and so edits
// another of two identical blocks. The branch and the combined patch must hold the tree the
// gate ran, not the other one.
func TestRedTeam44G_BranchIsTheTreeTheGateRan(t *testing.T) {
	requireGit(t)
	old := "a\nX1\nX2\nX3\nb\n"
	var cur strings.Builder
	cur.WriteString(old)
	for i := range 40 {
		cur.WriteString("m" + string(rune('a'+i%26)) + "\n")
	}
	cur.WriteString("X1\nX2\nX3\nc\n")
	dir, _ := repo(t, map[string]string{"f.txt": old, "g.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n"})
	older := git(t, dir, "rev-parse", "HEAD:f.txt")
	write(dir, "f.txt", cur.String())
	write(dir, "g.txt", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n")
	git(t, dir, "commit", "-qam", "two blocks")
	base := git(t, dir, "rev-parse", "HEAD")
	// The second block's X2 (line 47) changed, the index line naming the older blob.
	patch := []byte("diff --git a/f.txt b/f.txt\nindex " + older + "..1111111111111111111111111111111111111111 100644\n--- a/f.txt\n+++ b/f.txt\n" +
		"@@ -46,3 +46,3 @@\n X1\n-X2\n+EVIL\n X3\n")

	// What the gate runs: the patch applied as is to the base's index.
	idx := filepath.Join(t.TempDir(), "index")
	gate := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+idx, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = strings.NewReader(string(patch))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gate("read-tree", base)
	gate("apply", "--cached", "--whitespace=nowarn", "-")
	ran := gate("write-tree")
	if f := gate("cat-file", "blob", ran+":f.txt"); strings.Index(f, "EVIL") < strings.Index(f, "mz") {
		t.Fatalf("the gate's tree edits the first block:\n%s", f)
	}

	res, err := gitbranch.Create(t.Context(), "agora/forged", gitbranch.Options{Repo: dir, Base: base,
		Changes: []gitbranch.Change{{Label: "task a", Patch: patch, Author: gitbranch.Signature{Name: "a", Email: "a@a"}, Message: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "rev-parse", res.Head+"^{tree}"); got != ran {
		t.Errorf("the branch's tree %s is not the gate's %s:\n%s", got, ran, git(t, dir, "diff", ran, got))
	}
	combined, err := gitbranch.Combined(t.Context(), gitbranch.Options{Repo: dir, Base: base,
		Changes: []gitbranch.Change{{Label: "task a", Patch: patch}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(combined), "@@ -45,") && !strings.Contains(string(combined), "@@ -44,") {
		t.Errorf("the combined patch does not edit the second block:\n%s", combined)
	}
	// An honest patch that does not apply as is (made against an older base) still merges
	// three-way.
	// (Its context holds the line 5 the base changed since: only a merge places it.)
	stale := patchOf(t, dir, git(t, dir, "rev-parse", "HEAD~1"), func(d string) { write(d, "g.txt", "1\n2\n3\n4\n5\n6\n7\neight\n9\n") })
	if out, err := gitbranch.Combined(t.Context(), gitbranch.Options{Repo: dir, Base: base,
		Changes: []gitbranch.Change{{Label: "stale", Patch: stale}}}); err != nil || !strings.Contains(string(out), " five\n 6\n 7\n-8\n+eight\n") {
		t.Errorf("a stale patch no longer merges three-way: %v\n%s", err, out)
	}
}
