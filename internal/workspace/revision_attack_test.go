package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/workspace"
)

// secrets adds to r what a workspace allowing only some refs must never hand out: a branch
// secret/s, a commit only refs/hidden/h reaches, a stash, a tag hidden/t and a commit only the
// reflog keeps (branch gone/g, deleted). It returns each such commit by name, and leaves
// FETCH_HEAD and ORIG_HEAD naming the secret branch's commit.
func secrets(t *testing.T, r Repo) map[string]string {
	t.Helper()
	commit := func(branch, file string) string {
		run(t, r.Dir, "checkout", "-q", "-b", branch, "main")
		os.WriteFile(filepath.Join(r.Dir, file), []byte(file), 0o644)
		run(t, r.Dir, "add", file)
		run(t, r.Dir, "commit", "-q", "-m", file)
		id := run(t, r.Dir, "rev-parse", "HEAD")
		run(t, r.Dir, "checkout", "-q", "main")
		return id
	}
	s := map[string]string{
		"branch": commit("secret/s", "s"),
		"hidden": commit("tmp-hidden", "h"),
		"reflog": commit("gone/g", "g"),
		"tag":    commit("tmp-tag", "t"),
	}
	run(t, r.Dir, "update-ref", "refs/hidden/h", s["hidden"])
	run(t, r.Dir, "tag", "hidden/t", s["tag"])
	run(t, r.Dir, "branch", "-q", "-D", "tmp-hidden", "tmp-tag", "gone/g")
	os.WriteFile(filepath.Join(r.Dir, "a"), []byte("stashed"), 0o644)
	run(t, r.Dir, "stash", "-q")
	s["stash"] = run(t, r.Dir, "rev-parse", "stash@{0}")
	run(t, r.Dir, "update-ref", "FETCH_HEAD", s["branch"])
	run(t, r.Dir, "update-ref", "ORIG_HEAD", s["branch"])
	return s
}

// refused checks that resolving rev in w is refused as a [workspace.RevisionError] that names
// no path, and returns nothing.
func refused(t *testing.T, w workspace.Workspace, rev string) {
	t.Helper()
	got, err := workspace.Resolve(t.Context(), w, rev)
	if err == nil {
		t.Fatalf("revision %q resolved to %s; want it refused", rev, got)
	}
	if !errors.Is(err, workspace.ErrRevision) {
		t.Errorf("revision %q: %v is not a refusal (ErrRevision)", rev, err)
	}
	if got != "" {
		t.Errorf("revision %q: refused but returned %q", rev, got)
	}
	if strings.Contains(err.Error(), w.Doc.Repo) || strings.Contains(err.Error(), os.TempDir()) {
		t.Errorf("revision %q: the refusal names a path: %v", rev, err)
	}
}

// TestAttack_RevisionDescribeNameReachesAnyCommit: git rev-parse takes a name it cannot find
// in the form NAME-gHEX (git describe's output) as the abbreviated id HEX, so a name the
// patterns allow but no ref has (release/x-gHEX, vHEX-gHEX) would hand out any commit in the
// object store: another branch's, a hidden ref's, the stash's, a deleted branch's. Only a ref
// that exists under the allowed name resolves.
func TestAttack_RevisionDescribeNameReachesAnyCommit(t *testing.T) {
	r := newRepo(t)
	s := secrets(t, r)
	app := ws(r, "main", "release/*", "v*")
	for what, id := range map[string]string{"a forbidden branch's": r.Feature, "a dangling": r.Dangling,
		"the secret branch's": s["branch"], "a hidden ref's": s["hidden"], "the stash's": s["stash"],
		"the reflog's": s["reflog"], "a forbidden tag's": s["tag"]} {
		for _, rev := range []string{"release/x-g" + id[:12], "v9-g" + id[:7], "release/1-g" + id} {
			t.Run(what+" "+rev, func(t *testing.T) { refused(t, app, rev) })
		}
	}
	// The same name as an existing ref still resolves to that ref.
	run(t, r.Dir, "branch", "release/2-g"+r.Feature[:8], r.Release)
	if got, err := workspace.Resolve(t.Context(), app, "release/2-g"+r.Feature[:8]); err != nil || got != r.Release {
		t.Errorf("an existing branch named like describe output: got %s, %v; want %s", got, err, r.Release)
	}
}

// TestAttack_RevisionSyntaxIsRefused: every piece of revision syntax that walks, searches,
// names a reflog, another ref namespace, a path or an option is refused before git sees it,
// even by a workspace whose patterns allow every one- to three-level name.
func TestAttack_RevisionSyntaxIsRefused(t *testing.T) {
	r := newRepo(t)
	secrets(t, r)
	wt := filepath.Join(t.TempDir(), "wt")
	run(t, r.Dir, "worktree", "add", "-q", wt, "secret/s")
	all := ws(r, "*", "*/*", "*/*/*")
	for _, rev := range []string{
		":/s", "main^{/s}", "main@{1}", "@{-1}", "@", "HEAD@{upstream}", "main@{upstream}", "main~0", "main^0", "main^",
		"main..secret/s", "main...secret/s", "^secret/s", "stash@{0}", "refs/stash", "refs/hidden/h",
		"refs/remotes/origin/x", "refs/heads/secret/s", "refs/heads/../secret/s", "release/../secret/s",
		"main:a", ":0:a", ":a", "-", "--", "--all", "--upload-pack=touch x", "--output=x", " main", "\t-x", "main\n",
		"main\x00secret/s", "main secret/s", "HEAD", "secret/s^{commit}", "main.lock", ".main", "main/", "/main",
		"main//x", "secret/.s", "release/*", "release/[a-z]", "release/?", "release\\1", "r\u00e9lease",
		strings.Repeat("a", 256), strings.Repeat("a/", 200) + "a",
	} {
		t.Run(rev, func(t *testing.T) { refused(t, all, rev) })
	}
	// Names the patterns allow that git would read as something else than refs/heads/NAME or
	// refs/tags/NAME: the top-level pseudo-refs, the stash, a worktree's HEAD, a hidden ref's
	// last component, an abbreviated id.
	for _, rev := range []string{"FETCH_HEAD", "ORIG_HEAD", "stash", "hidden/h", "worktrees/wt/HEAD",
		"main-worktree/HEAD", "heads/secret/s", "tags/hidden/t", "remotes/origin/x", r.Dangling[:7], r.Feature[:12]} {
		t.Run("allowed "+rev, func(t *testing.T) { refused(t, all, rev) })
	}
}

// TestAttack_RevisionCommitIDs: a full id is handed out only when an allowed ref reaches it:
// not a forbidden branch's, a hidden ref's, the stash's or the reflog's commit, not a tag
// object's id (it peels to another), not a 64-digit id in a SHA-1 repository, not a branch
// that an allowed pattern names after a secret commit's id.
func TestAttack_RevisionCommitIDs(t *testing.T) {
	r := newRepo(t)
	s := secrets(t, r)
	app := ws(r, "main", "release/*", "v*")
	for what, id := range map[string]string{"secret branch": s["branch"], "hidden ref": s["hidden"],
		"stash": s["stash"], "reflog": s["reflog"], "forbidden tag": s["tag"], "dangling": r.Dangling,
		"tag object": run(t, r.Dir, "rev-parse", "v1.0"), "tree": run(t, r.Dir, "rev-parse", "main^{tree}"),
		"sha-256 length": r.Main + strings.Repeat("0", 24), "uppercase secret": strings.ToUpper(s["branch"])} {
		t.Run(what, func(t *testing.T) { refused(t, app, id) })
	}
	// A branch named after the secret commit's id, which an allowed pattern matches, and
	// pointing at an allowed commit: the id is still read as the secret commit's.
	run(t, r.Dir, "branch", "release/"+s["branch"], r.Main)
	run(t, r.Dir, "branch", s["branch"], r.Main)
	refused(t, ws(r, "main", "release/*", "*"), s["branch"][:40])
	// A replace ref that makes release/1's tip look like the secret commit does not make it
	// reachable from release/1: replace refs are off.
	run(t, r.Dir, "replace", r.Release, s["branch"])
	refused(t, app, s["branch"])
	if got, err := workspace.Resolve(t.Context(), app, "release/1"); err != nil || got != r.Release {
		t.Errorf("release/1 under a replace ref: got %s, %v; want %s", got, err, r.Release)
	}
}

// TestAttack_RevisionSHA256Abbreviation: in a SHA-256 repository a 40-digit id is an
// abbreviation to git; it is refused even when it abbreviates an allowed commit.
func TestAttack_RevisionSHA256Abbreviation(t *testing.T) {
	requireGit(t)
	dir := filepath.Join(t.TempDir(), "app")
	os.MkdirAll(dir, 0o755)
	run(t, dir, "init", "-q", "-b", "main", "--object-format=sha256")
	run(t, dir, "commit", "-q", "--allow-empty", "-m", "one")
	main := run(t, dir, "rev-parse", "HEAD")
	w := ws(Repo{Dir: dir}, "main")
	if got, err := workspace.Resolve(t.Context(), w, main); err != nil || got != main {
		t.Fatalf("full SHA-256 id: got %s, %v; want %s", got, err, main)
	}
	refused(t, w, main[:40])
}

// TestAttack_RevisionCallerEnvironment: GIT_* variables in agora's own environment (a
// GIT_DIR, an object directory or alternates of another repository, config given on the
// environment, a namespace) do not change what the workspace's repository answers.
func TestAttack_RevisionCallerEnvironment(t *testing.T) {
	r := newRepo(t)
	other := newRepo(t)
	s := secrets(t, other)
	hook := filepath.Join(t.TempDir(), "ran")
	for k, v := range map[string]string{
		"GIT_DIR": filepath.Join(other.Dir, ".git"), "GIT_WORK_TREE": other.Dir,
		"GIT_OBJECT_DIRECTORY":             filepath.Join(other.Dir, ".git", "objects"),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES": filepath.Join(other.Dir, ".git", "objects"),
		"GIT_CONFIG_COUNT":                 "1", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "touch " + hook,
		"GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='touch " + hook + "'", "GIT_NAMESPACE": "x",
		"GIT_REPLACE_REF_BASE": "refs/heads/", "GIT_CEILING_DIRECTORIES": "", "GIT_DISCOVERY_ACROSS_FILESYSTEM": "1",
	} {
		t.Setenv(k, v)
	}
	app := ws(r, "main", "release/*", "secret/*")
	if got, err := workspace.Resolve(t.Context(), app, "main"); err != nil || got != r.Main {
		t.Errorf("main: got %s, %v; want %s", got, err, r.Main)
	}
	refused(t, app, "secret/s")
	refused(t, app, s["branch"])
	refused(t, app, s["hidden"])
	if _, err := os.Stat(hook); err == nil {
		t.Error("a program named in the environment's git config ran")
	}
}

// TestAttack_RevisionRepositoryGone: a workspace whose directory no longer holds a repository
// (removed, or now a plain directory inside another repository) resolves nothing of the
// repository around it, and its refusal names no path.
func TestAttack_RevisionRepositoryGone(t *testing.T) {
	outer := newRepo(t)
	inner := filepath.Join(outer.Dir, "sub")
	os.Mkdir(inner, 0o755)
	w := ws(Repo{Dir: inner}, "main", "release/*")
	for _, rev := range []string{"main", "release/1", outer.Main, ""} {
		t.Run("inside another repository "+rev, func(t *testing.T) { refused(t, w, rev) })
	}
	w.Doc.Repo = filepath.Join(t.TempDir(), "removed")
	for _, rev := range []string{"main", outer.Main} {
		t.Run("removed "+rev, func(t *testing.T) { refused(t, w, rev) })
	}
}

// TestAttack_RevisionPackedRefsAndAlternates: the exact lookup finds refs that live only in
// packed-refs (and a describe-like name is still refused there), and a repository that
// borrows another's objects (objects/info/alternates, as git clone --reference makes) hands
// out none of that repository's commits: not by full id, not by a describe-like name.
func TestAttack_RevisionPackedRefsAndAlternates(t *testing.T) {
	r := newRepo(t)
	run(t, r.Dir, "pack-refs", "--all", "--prune")
	if _, err := os.Stat(filepath.Join(r.Dir, ".git", "refs", "heads", "main")); err == nil {
		t.Fatal("main is still a loose ref")
	}
	app := ws(r, "main", "release/*", "v*")
	for rev, want := range map[string]string{"main": r.Main, "release/1": r.Release, "v1.0": r.MainParent} {
		if got, err := workspace.Resolve(t.Context(), app, rev); err != nil || got != want {
			t.Errorf("packed %s: got %s, %v; want %s", rev, got, err, want)
		}
	}
	refused(t, app, "release/x-g"+r.Feature[:10])

	other := newRepo(t)
	s := secrets(t, other)
	os.WriteFile(filepath.Join(r.Dir, ".git", "objects", "info", "alternates"), []byte(filepath.Join(other.Dir, ".git", "objects")+"\n"), 0o644)
	// Only the secrets are the other repository's own: two repositories newRepo made in the
	// same second have the same commits.
	for _, id := range []string{s["branch"], s["hidden"], s["stash"], s["reflog"], s["tag"]} {
		refused(t, app, id)
		refused(t, app, "release/x-g"+id[:10])
		refused(t, app, "v9-g"+id[:7])
	}
}
