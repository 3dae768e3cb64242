package gitbranch_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/gitbranch"
)

func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// repo makes a repository with files committed on main and returns it with the commit.
func repo(t testing.TB, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	for p, s := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	return dir, git(t, dir, "rev-parse", "HEAD")
}

// patchOf makes the patch edit() produces against base in a scratch clone, as a dispatch does.
func patchOf(t testing.TB, src, base string, edit func(dir string)) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	git(t, filepath.Dir(dir), "clone", "-q", "--no-checkout", src, dir)
	git(t, dir, "checkout", "-q", "--detach", base)
	edit(dir)
	git(t, dir, "add", "-A")
	return []byte(git(t, dir, "diff", "--cached", "--binary", "--full-index", base) + "\n")
}

func write(dir, p, s string) {
	os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
	os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
}

const lines = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"

// state is what must not change in the person's checkout.
func state(t testing.TB, dir string) string {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("head=%s branch=%s status=%q index=%x worktree=%q", git(t, dir, "rev-parse", "HEAD"),
		git(t, dir, "symbolic-ref", "HEAD"), git(t, dir, "status", "--porcelain", "--untracked-files=all"),
		sha256.Sum256(idx), readAll(t, dir))
}

func readAll(t testing.TB, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d != nil && d.Type().IsRegular() {
			s, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s=%s;", p, s)
		}
		return nil
	})
	return b.String()
}

func sig(name string) gitbranch.Signature {
	return gitbranch.Signature{Name: name + "@sha256:" + strings.Repeat("ab", 32), Email: name + "@subagent.agora.invalid"}
}

func TestCreate_OneCommitPerChangeInOrder(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"shared.txt": lines, "README.md": "app\n"})
	// A local edit the person has not committed: it must survive untouched.
	write(dir, "README.md", "app, being edited\n")
	write(dir, "scratch.txt", "untracked\n")
	before := state(t, dir)

	changes := []gitbranch.Change{
		{Label: "task a", Author: sig("fixer"), Message: "task a\n\nTask: a\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "a.txt", "a\n") })},
		{Label: "task b", Author: sig("fixer"), Message: "task b\n", Patch: patchOf(t, dir, base, func(d string) {
			write(d, "shared.txt", strings.Replace(lines, "two", "TWO", 1))
		})},
		{Label: "task c", Author: sig("editor"), Message: "task c\n", Patch: patchOf(t, dir, base, func(d string) {
			write(d, "shared.txt", strings.Replace(lines, "seven", "SEVEN", 1))
		})},
		{Label: "task empty", Author: sig("fixer"), Message: "no changes\n"},
		{Label: "task d", Author: sig("fixer"), Message: "task d\n", Patch: patchOf(t, dir, base, func(d string) { os.Remove(filepath.Join(d, "README.md")) })},
	}
	when := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	res, err := gitbranch.Create(t.Context(), "agora/run-1", gitbranch.Options{Repo: dir, Base: base, Changes: changes, When: when})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Commits) != 4 || res.Ref != "refs/heads/agora/run-1" {
		t.Fatalf("got %+v, want 4 commits on refs/heads/agora/run-1", res)
	}
	log := git(t, dir, "log", "--reverse", "--format=%an|%ae|%s|%cn", "agora/run-1", "^"+base)
	want := strings.Join([]string{
		sig("fixer").Name + "|fixer@subagent.agora.invalid|task a|agora",
		sig("fixer").Name + "|fixer@subagent.agora.invalid|task b|agora",
		sig("editor").Name + "|editor@subagent.agora.invalid|task c|agora",
		sig("fixer").Name + "|fixer@subagent.agora.invalid|task d|agora",
	}, "\n")
	if log != want {
		t.Errorf("git log:\n%s\nwant:\n%s", log, want)
	}
	got := git(t, dir, "show", "agora/run-1:shared.txt")
	if got+"\n" != strings.Replace(strings.Replace(lines, "two", "TWO", 1), "seven", "SEVEN", 1) {
		t.Errorf("shared.txt on the branch = %q, want both edits merged", got)
	}
	if out := git(t, dir, "ls-tree", "--name-only", "agora/run-1"); out != "a.txt\nshared.txt" {
		t.Errorf("branch tree = %q", out)
	}
	if after := state(t, dir); after != before {
		t.Errorf("the checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	git(t, dir, "fsck", "--strict", "--no-dangling") // the commits and trees are in the repository's store
	// Same changes, same commits: dated by When, not the clock.
	res2, err := gitbranch.Create(t.Context(), "agora/run-1-again", gitbranch.Options{Repo: dir, Base: base, Changes: changes, When: when})
	if err != nil || res2.Head != res.Head {
		t.Errorf("rebuilt head %s, %v; want %s", res2.Head, err, res.Head)
	}
	// The branch exists now: refused, not replaced.
	_, err = gitbranch.Create(t.Context(), "agora/run-1", gitbranch.Options{Repo: dir, Base: base, Changes: changes[:1], When: when})
	if !errors.Is(err, gitbranch.ErrBranchExists) || git(t, dir, "rev-parse", "agora/run-1") != res.Head {
		t.Errorf("existing branch: got %v, and it must keep %s", err, res.Head)
	}

	combined, err := gitbranch.Combined(t.Context(), gitbranch.Options{Repo: dir, Base: base, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	if want := git(t, dir, "diff", "--binary", "--full-index", base, "agora/run-1") + "\n"; string(combined) != want {
		t.Errorf("combined patch:\n%s\nwant the branch's diff:\n%s", combined, want)
	}
}

func TestCreate_ConflictCreatesNothing(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"shared.txt": lines})
	before := state(t, dir)
	changes := []gitbranch.Change{
		{Label: "task b (dispatch D1)", Author: sig("fixer"), Message: "b\n", Patch: patchOf(t, dir, base, func(d string) {
			write(d, "shared.txt", strings.Replace(lines, "two", "TWO", 1))
		})},
		{Label: "task c (dispatch D2)", Author: sig("fixer"), Message: "c\n", Patch: patchOf(t, dir, base, func(d string) {
			write(d, "shared.txt", strings.Replace(lines, "two", "deux", 1))
		})},
	}
	_, err := gitbranch.Create(t.Context(), "agora/conflict", gitbranch.Options{Repo: dir, Base: base, Changes: changes})
	var ce *gitbranch.ConflictError
	if !errors.As(err, &ce) || ce.Label != "task c (dispatch D2)" || strings.Join(ce.Files, ",") != "shared.txt" {
		t.Fatalf("got %v, want a conflict of task c in shared.txt", err)
	}
	if !strings.Contains(err.Error(), "nothing was created") {
		t.Errorf("error %q does not say nothing was created", err)
	}
	if refs := git(t, dir, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main" {
		t.Errorf("refs after a conflict: %q", refs)
	}
	if after := state(t, dir); after != before {
		t.Errorf("the checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := gitbranch.Combined(t.Context(), gitbranch.Options{Repo: dir, Base: base, Changes: changes}); !errors.As(err, &ce) {
		t.Errorf("combined with a conflict: %v", err)
	}
}

// The attack: a repository whose hooks, fsmonitor and configured drivers would run a program.
// Its .gitattributes (committed, and in .git/info/attributes) selects a merge, filter and diff
// driver that .git/config defines, commit.gpgSign names a gpg.program, and the second change
// needs a real three-way merge, so git would call the merge driver if it could. Nothing runs.
func TestCreate_RunsNoHookOrFsmonitor(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"f": lines, ".gitattributes": "* merge=evil filter=evil diff=evil\n"})
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\necho \"$0 $*\" >> " + marker + "\ncat\nexit 1\n"
	for _, h := range []string{"post-commit", "pre-commit", "reference-transaction", "post-index-change", "post-checkout", "pre-auto-gc", "post-rewrite", "pre-push"} {
		if err := os.WriteFile(filepath.Join(dir, ".git", "hooks", h), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(t.TempDir(), "evil.sh")
	os.WriteFile(prog, []byte(script), 0o755)
	for _, kv := range [][2]string{
		{"core.fsmonitor", prog}, {"core.hooksPath", filepath.Join(dir, ".git", "hooks")},
		{"merge.evil.driver", prog + " %O %A %B"}, {"merge.default", "evil"},
		{"filter.evil.clean", prog}, {"filter.evil.smudge", prog}, {"filter.evil.process", prog}, {"filter.evil.required", "true"},
		{"diff.evil.command", prog}, {"diff.evil.textconv", prog}, {"diff.external", prog},
		{"commit.gpgSign", "true"}, {"gpg.program", prog}, {"gc.auto", "1"}, {"core.sharedRepository", "group"},
	} {
		git(t, dir, "config", kv[0], kv[1])
	}
	os.WriteFile(filepath.Join(dir, ".git", "info", "attributes"), []byte("* merge=evil filter=evil diff=evil\n"), 0o644)
	changes := []gitbranch.Change{
		{Label: "task a", Author: sig("fixer"), Message: "a\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "f", strings.Replace(lines, "two", "TWO", 1)) })},
		{Label: "task b", Author: sig("fixer"), Message: "b\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "f", strings.Replace(lines, "seven", "SEVEN", 1)) })},
	}
	os.Remove(marker)
	// The trap works: plain git in this repository runs the reference-transaction hook, and
	// its three-way apply of the second change runs the merge driver.
	idx := filepath.Join(t.TempDir(), "index")
	for i, args := range [][]string{{"update-ref", "refs/heads/probe", base}, {"read-tree", base}, {"apply", "--cached", "--3way", "-"}, {"apply", "--cached", "--3way", "-"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "GIT_INDEX_FILE="+idx, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if i > 1 {
			cmd.Stdin = bytes.NewReader(changes[i-2].Patch)
		}
		cmd.CombinedOutput() // the programs fail the update and the merge; what matters is that they ran
	}
	ran, _ := os.ReadFile(marker)
	if !strings.Contains(string(ran), "reference-transaction") || !strings.Contains(string(ran), "evil.sh") {
		t.Fatalf("the planted hook did not run for plain git, so this test proves nothing: %q", ran)
	}
	os.Remove(marker)
	res, err := gitbranch.Create(t.Context(), "agora/hooks", gitbranch.Options{Repo: dir, Base: base, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitbranch.Combined(t.Context(), gitbranch.Options{Repo: dir, Base: base, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("a hook, the fsmonitor or a configured program ran: %s", b)
	}
	// git's own text merge made the commit, unsigned.
	if got := git(t, dir, "show", "agora/hooks:f") + "\n"; got != strings.Replace(strings.Replace(lines, "two", "TWO", 1), "seven", "SEVEN", 1) {
		t.Errorf("f on the branch = %q, want both edits merged by git's text merge", got)
	}
	if c := git(t, dir, "cat-file", "commit", res.Head); strings.Contains(c, "gpgsig") {
		t.Errorf("the commit is signed:\n%s", c)
	}
}

func TestCreate_RefusesBadInput(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"f": "x\n"})
	for _, name := range []string{"", "-x", "a..b", "x.lock", "a@{1}", "with space", "refs/heads/x", "a/", "/a", "a//b", ".hidden", "a/.b", "HEAD", "a\x00b", "tab\tx", "ü", "a:b", "a~1", "a^", "a?", "a*", "a[", "a\\b", "a."} {
		if err := gitbranch.CheckBranchName(name); err == nil {
			t.Errorf("CheckBranchName(%q) = nil, want refused", name)
		}
		if _, err := gitbranch.Create(t.Context(), name, gitbranch.Options{Repo: dir, Base: base}); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
	}
	for _, name := range []string{"agora/run-1", "agora/01JABC", "feature_x", "a-b.c/d"} {
		if err := gitbranch.CheckBranchName(name); err != nil {
			t.Errorf("CheckBranchName(%q) = %v", name, err)
		}
	}
	for _, b := range []string{"main", "HEAD", "--all", strings.Repeat("0", 40), base[:12]} {
		if _, err := gitbranch.Create(t.Context(), "agora/x", gitbranch.Options{Repo: dir, Base: b}); err == nil {
			t.Errorf("base %q accepted; want a full commit id that is in the repository", b)
		}
	}
}

// FuzzCheckBranchName: whatever CheckBranchName accepts, git accepts as a branch name.
func FuzzCheckBranchName(f *testing.F) {
	for _, s := range []string{"agora/run", "a..b", "-x", "x.lock", "@", "a/.b", "a@{", "ü"} {
		f.Add(s)
	}
	_, err := exec.LookPath("git")
	f.Fuzz(func(t *testing.T, name string) {
		if gitbranch.CheckBranchName(name) != nil || err != nil {
			return
		}
		if out, err := exec.Command("git", "check-ref-format", "--branch", name).CombinedOutput(); err != nil {
			t.Fatalf("accepted %q, which git refuses: %s", name, out)
		}
	})
}

// The attack: an agent's patch that writes into .git (a hook that would run on the next
// checkout). git refuses the path; nothing is created.
func TestCreate_RefusesAPatchIntoGitDir(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"f": "x\n"})
	evil := []byte("diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n" +
		"--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+touch /tmp/pwned\n")
	for _, p := range [][]byte{evil, []byte(strings.ReplaceAll(string(evil), ".git/", "sub/.GIT/"))} {
		_, err := gitbranch.Create(t.Context(), "agora/evil", gitbranch.Options{Repo: dir, Base: base,
			Changes: []gitbranch.Change{{Label: "task evil", Author: sig("fixer"), Message: "evil\n", Patch: p}}})
		var ce *gitbranch.ConflictError
		if !errors.As(err, &ce) || !strings.Contains(ce.Git, "invalid path") {
			t.Errorf("a patch into the git directory: %v", err)
		}
		if refs := git(t, dir, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main" {
			t.Errorf("refs: %q", refs)
		}
	}
}

// A SHA-256 repository: the private git directory takes the repository's object format.
func TestCreate_SHA256Repository(t *testing.T) {
	requireGit(t)
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main", "--object-format=sha256")
	write(dir, "f", lines)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")
	base := git(t, dir, "rev-parse", "HEAD")
	if len(base) != 64 {
		t.Skipf("SKIP: git made a %d-hex commit id in a sha256 repository", len(base))
	}
	changes := []gitbranch.Change{
		{Label: "task a", Author: sig("fixer"), Message: "a\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "f", strings.Replace(lines, "two", "TWO", 1)) })},
		{Label: "task b", Author: sig("fixer"), Message: "b\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "f", strings.Replace(lines, "seven", "SEVEN", 1)) })},
	}
	res, err := gitbranch.Create(t.Context(), "agora/sha256", gitbranch.Options{Repo: dir, Base: base, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Head) != 64 || git(t, dir, "rev-list", "--count", "main..agora/sha256") != "2" {
		t.Errorf("got %+v; want two commits with 64-hex ids", res)
	}
	git(t, dir, "fsck", "--strict")
}

// --repo that is not a repository, or a directory inside one, is refused before anything.
func TestCreate_RefusesANonRepository(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"sub/f": "x\n"})
	for _, r := range []string{t.TempDir(), filepath.Join(dir, "sub")} {
		_, err := gitbranch.Create(t.Context(), "agora/x", gitbranch.Options{Repo: r, Base: base})
		if err == nil || !strings.Contains(err.Error(), "is not a git repository") {
			t.Errorf("repo %s: %v", r, err)
		}
	}
}

// agora lays out each commit itself and has git store them in one process: the commits are
// the ones git commit-tree makes from the same tree, parent, people, date and message.
func TestCreate_CommitsAreCommitTrees(t *testing.T) {
	requireGit(t)
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			git(t, dir, "init", "-q", "-b", "main", "--object-format="+format)
			write(dir, "f", lines)
			git(t, dir, "add", "-A")
			git(t, dir, "commit", "-qm", "base")
			base := git(t, dir, "rev-parse", "HEAD")
			when := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			changes := []gitbranch.Change{
				{Label: "task a", Author: sig("fixer"), Message: "agora: task a\n\nAgora-Task: a\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "f", strings.Replace(lines, "two", "TWO", 1)) })},
				{Label: "task b", Author: sig("editor"), Message: "no final newline", Patch: patchOf(t, dir, base, func(d string) { write(d, "g", "g\n") })},
			}
			res, err := gitbranch.Create(t.Context(), "agora/x", gitbranch.Options{Repo: dir, Base: base, Changes: changes, When: when})
			if err != nil {
				t.Fatal(err)
			}
			parent := base
			for i, c := range changes {
				cmd := exec.Command("git", "commit-tree", git(t, dir, "rev-parse", res.Commits[i]+"^{tree}"), "-p", parent, "-F", "-")
				cmd.Dir, cmd.Stdin = dir, strings.NewReader(c.Message)
				cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
					"GIT_AUTHOR_NAME="+c.Author.Name, "GIT_AUTHOR_EMAIL="+c.Author.Email, "GIT_AUTHOR_DATE=@1795348800 +0000",
					"GIT_COMMITTER_NAME=agora", "GIT_COMMITTER_EMAIL=agora@agora.invalid", "GIT_COMMITTER_DATE=@1795348800 +0000")
				out, err := cmd.Output()
				if err != nil {
					t.Fatal(err)
				}
				if want := strings.TrimSpace(string(out)); res.Commits[i] != want {
					t.Errorf("commit %d = %s, git commit-tree makes %s:\n%s", i, res.Commits[i], want, git(t, dir, "cat-file", "commit", res.Commits[i]))
				}
				parent = res.Commits[i]
			}
			git(t, dir, "fsck", "--strict", "--no-dangling")
		})
	}
	dir, base := repo(t, map[string]string{"f": "x\n"})
	for _, a := range []gitbranch.Signature{{Name: "x <evil@x>", Email: "a@b"}, {Name: "x", Email: "a@b>\ncommitter z"}, {Name: "", Email: "a@b"}} {
		_, err := gitbranch.Create(t.Context(), "agora/bad-author", gitbranch.Options{Repo: dir, Base: base, Changes: []gitbranch.Change{
			{Label: "task a", Author: a, Message: "a\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "f", "y\n") })}}})
		if err == nil || !strings.Contains(err.Error(), "cannot be written in a commit") {
			t.Errorf("author %+v: %v", a, err)
		}
	}
}

// A linked worktree as the repository: the branch lands in the shared refs, and neither the
// worktree's checkout nor the main one moves.
func TestCreate_LinkedWorktree(t *testing.T) {
	requireGit(t)
	dir, base := repo(t, map[string]string{"f": lines})
	wt := filepath.Join(t.TempDir(), "wt")
	git(t, dir, "worktree", "add", "-q", "-b", "side", wt)
	before, beforeWT := state(t, dir), git(t, wt, "rev-parse", "HEAD")+git(t, wt, "symbolic-ref", "HEAD")+git(t, wt, "status", "--porcelain")
	changes := []gitbranch.Change{{Label: "task a", Author: sig("fixer"), Message: "a\n", Patch: patchOf(t, dir, base, func(d string) { write(d, "g", "g\n") })}}
	if _, err := gitbranch.Create(t.Context(), "agora/from-worktree", gitbranch.Options{Repo: wt, Base: base, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if n := git(t, dir, "rev-list", "--count", "main..agora/from-worktree"); n != "1" {
		t.Errorf("the main repository sees %s commits on the branch, want 1", n)
	}
	if after := state(t, dir); after != before {
		t.Errorf("the main checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	if after := git(t, wt, "rev-parse", "HEAD") + git(t, wt, "symbolic-ref", "HEAD") + git(t, wt, "status", "--porcelain"); after != beforeWT {
		t.Errorf("the worktree changed: %q, was %q", after, beforeWT)
	}
}
