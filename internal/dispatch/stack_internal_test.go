package dispatch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// stackRepo is a repository with one commit and the patches of a chain made on it: impl adds
// lib.txt, docs (made on impl) edits it and adds docs.txt, and clash (made on the commit)
// writes lib.txt itself, which conflicts with impl.
type stackRepo struct {
	dir, commit       string
	impl, docs, clash []byte
}

func newStackRepo(t *testing.T) stackRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("README", "app\n")
	git("add", "-A")
	git("commit", "-qm", "base")
	r := stackRepo{dir: dir, commit: strings.TrimSpace(git("rev-parse", "HEAD"))}
	diff := func() []byte {
		git("add", "-A")
		return []byte(git("diff", "--cached", "--binary", "--full-index", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/"))
	}
	write("lib.txt", "one\ntwo\n")
	r.impl = diff()
	git("commit", "-qm", "impl")
	write("lib.txt", "one\ntwo, documented\n")
	write("docs.txt", "how to\n")
	r.docs = diff()
	git("reset", "-q", "--hard", r.commit)
	write("lib.txt", "other\n")
	r.clash = diff()
	git("reset", "-q", "--hard", r.commit)
	return r
}

// The stacked base is one commit per patch on the run's commit, the same commit id whether
// built at accept (reading the source's objects), in the workspace's own fetched repository
// or in the verify gate's; the workspace is checked out at it, and the gate's touched paths
// are the dispatch's own patch's alone.
func TestStack_SameBaseEverywhere(t *testing.T) {
	sr := newStackRepo(t)
	patches := []stackPatch{{task: "impl", dispatch: "D1", patch: sr.impl}, {task: "docs", dispatch: "D2", patch: sr.docs}}
	base, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), sr.dir, sr.commit, patches)
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{ID: "d1", Repo: sr.dir, Revision: sr.commit, StackBase: base}
	st := stageAt(t.TempDir(), "d1")
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := prepareWorkspace(t.Context(), r, st, patches); err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSpace(stackGit(t, st.workspace, "rev-parse", "HEAD"))
	if head != base {
		t.Errorf("the workspace's HEAD is %s, the recorded base %s", head, base)
	}
	if got := stackGit(t, st.workspace, "log", "--format=%s|%an", sr.commit+"..HEAD"); got != "agora: stack task docs|agora\nagora: stack task impl|agora\n" {
		t.Errorf("the stack's commits:\n%s", got)
	}
	if b, _ := os.ReadFile(filepath.Join(st.workspace, "lib.txt")); string(b) != "one\ntwo, documented\n" {
		t.Errorf("lib.txt in the workspace = %q", b)
	}
	if s := stackGit(t, st.workspace, "status", "--porcelain"); s != "" {
		t.Errorf("the workspace is not clean at its base:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(st.workspace, ".git", "info", "attributes")); err == nil {
		t.Error("the build's attributes were left in the workspace")
	}

	// The gate: its own patch (edits docs.txt) is what it touches, never the bases' files.
	own := []byte("diff --git a/docs.txt b/docs.txt\n--- a/docs.txt\n+++ b/docs.txt\n@@ -1 +1 @@\n-how to\n+how to, migrated\n")
	gst := stageAt(t.TempDir(), "d1")
	if err := os.MkdirAll(gst.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tree, err := buildGateTree(t.Context(), r, gst, own, patches)
	if err != nil {
		t.Fatal(err)
	}
	if tree.applyErr != "" || tree.base != base || !slices.Equal(tree.touched, []string{"docs.txt"}) {
		t.Errorf("gate tree: base %s (want %s), touched %q, applyErr %q", tree.base, base, tree.touched, tree.applyErr)
	}
	if err := tree.checkout(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"lib.txt": "one\ntwo, documented\n", "docs.txt": "how to, migrated\n"} {
		if b, _ := os.ReadFile(filepath.Join(tree.dir, name)); string(b) != want {
			t.Errorf("gate tree %s = %q, want %q", name, b, want)
		}
	}

	// Bases that changed nothing make no commit: the base is the run's commit itself.
	if got, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), sr.dir, sr.commit,
		[]stackPatch{{task: "noop", dispatch: "D0"}, {task: "noop2", dispatch: "D4", patch: []byte{}}}); err != nil || got != sr.commit {
		t.Errorf("a stack of empty patches: %s, %v; want the commit %s", got, err, sr.commit)
	}

	// A base recorded otherwise (a forged or stale record) is refused, not built on.
	r.StackBase = sr.commit
	st2 := stageAt(t.TempDir(), "d1")
	os.MkdirAll(st2.dir, 0o700)
	var me *stackMismatchError
	if err := prepareWorkspace(t.Context(), r, st2, patches); !errors.As(err, &me) {
		t.Errorf("a stack other than the recorded one: %v", err)
	}
}

// Two bases that conflict: the error names the task that does not apply, the ones before it
// and git's words.
func TestStack_Conflict(t *testing.T) {
	sr := newStackRepo(t)
	_, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), sr.dir, sr.commit, []stackPatch{{task: "impl", dispatch: "D1", patch: sr.impl}, {task: "clash", dispatch: "D3", patch: sr.clash}})
	var ce *StackConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a StackConflictError", err)
	}
	msg := ce.Error()
	for _, want := range []string{"task clash's work (dispatch D3)", "with the work of impl", "lib.txt", "the agent did not run"} {
		if !strings.Contains(msg, want) {
			t.Errorf("conflict %q lacks %q", msg, want)
		}
	}
}

// Without a repository the stack is files on the empty tree: the workspace holds them, with
// no .git, and the base is their tree.
func TestStack_NoRepository(t *testing.T) {
	sr := newStackRepo(t)
	patches := []stackPatch{{task: "impl", dispatch: "D1", patch: sr.impl}, {task: "docs", dispatch: "D2", patch: sr.docs}}
	base, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), "", "", patches)
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{ID: "d1", StackBase: base}
	st := stageAt(t.TempDir(), "d1")
	os.MkdirAll(st.dir, 0o700)
	if err := prepareWorkspace(t.Context(), r, st, patches); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(st.workspace)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"docs.txt", "lib.txt"}) {
		t.Errorf("the workspace holds %q, want the stack's files only", names)
	}
	if _, err := os.Stat(filepath.Join(st.dir, stackGitDir)); err == nil {
		t.Error("the stack's private git directory was left in the stage")
	}
	gst := stageAt(t.TempDir(), "d1")
	os.MkdirAll(gst.dir, 0o700)
	tree, err := buildGateTree(t.Context(), r, gst, nil, patches)
	if err != nil {
		t.Fatal(err)
	}
	if tree.base != base || tree.empty {
		t.Errorf("gate base %s (want %s), empty %v", tree.base, base, tree.empty)
	}
	if err := tree.checkout(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(tree.dir, "lib.txt")); string(b) != "one\ntwo, documented\n" {
		t.Errorf("gate tree lib.txt = %q", b)
	}
}

func stackGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// A base's agent writes a .gitattributes that would convert line endings on checkout: the
// downstream workspace holds the tree's bytes exactly (as the gate's tree does), so its
// agent's patch is taken against what the gate and a branch apply it to.
func TestStack_AttributesDoNotTransform(t *testing.T) {
	sr := newStackRepo(t)
	attrs := []byte("diff --git a/.gitattributes b/.gitattributes\nnew file mode 100644\n--- /dev/null\n+++ b/.gitattributes\n@@ -0,0 +1 @@\n+* text eol=crlf\n" +
		"diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n")
	patches := []stackPatch{{task: "attrs", dispatch: "D1", patch: attrs}}
	base, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), sr.dir, sr.commit, patches)
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{ID: "d1", Repo: sr.dir, Revision: sr.commit, StackBase: base}
	st := stageAt(t.TempDir(), "d1")
	os.MkdirAll(st.dir, 0o700)
	if err := prepareWorkspace(t.Context(), r, st, patches); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(st.workspace, "notes.txt")); string(b) != "one\ntwo\n" {
		t.Errorf("notes.txt in the workspace = %q, want the blob's bytes", b)
	}
}

// A base whose patch makes a symlink out of the tree, and a later base that writes through
// it: the stack does not build (git refuses a path beyond a symbolic link), and nothing is
// written where the link points.
func TestStack_NoWriteThroughALink(t *testing.T) {
	sr := newStackRepo(t)
	outside := t.TempDir()
	link := []byte("diff --git a/out b/out\nnew file mode 120000\n--- /dev/null\n+++ b/out\n@@ -0,0 +1 @@\n+" + outside + "\n\\ No newline at end of file\n")
	through := []byte("diff --git a/out/pwned b/out/pwned\nnew file mode 100644\n--- /dev/null\n+++ b/out/pwned\n@@ -0,0 +1 @@\n+x\n")
	patches := []stackPatch{{task: "link", dispatch: "D1", patch: link}, {task: "through", dispatch: "D2", patch: through}}
	for _, repo := range []string{sr.dir, ""} {
		rev := sr.commit
		if repo == "" {
			rev = ""
		}
		_, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), repo, rev, patches)
		var ce *StackConflictError
		if !errors.As(err, &ce) || ce.Task != "through" || !strings.Contains(ce.Git, "symbolic link") {
			t.Errorf("repo %q: a write through a base's link: %v", repo, err)
		}
	}
	// Built anyway on a record that says it did (a forged stack_base), staging refuses too.
	r := &Record{ID: "d1", StackBase: "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}
	st := stageAt(t.TempDir(), "d1")
	os.MkdirAll(st.dir, 0o700)
	var ce *StackConflictError
	if err := prepareWorkspace(t.Context(), r, st, patches); !errors.As(err, &ce) {
		t.Errorf("staging a stack through a link: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the link's target holds %d entries", len(ents))
	}
}

// TestStack_ForgedIndexLineMergesNothingElse: a base's patch whose index line names an older
// blob of the file (kept in the history) puts its hunk where it applies as is, on the lines
// its verify gate changed, not where git's --3way would merge it from that older blob (the
// first of two identical blocks). Failed before: the stacked base edited the first block.
func TestStack_ForgedIndexLineMergesNothingElse(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	dir := t.TempDir()
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	old := "a\nX1\nX2\nX3\nb\n"
	cur := old
	for i := range 40 {
		cur += "m" + string(rune('a'+i%26)) + "\n"
	}
	cur += "X1\nX2\nX3\nc\n"
	git("", "init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	git("", "add", "-A")
	git("", "commit", "-qm", "one block")
	older := git("", "rev-parse", "HEAD:f.txt")
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(cur), 0o644); err != nil {
		t.Fatal(err)
	}
	git("", "commit", "-qam", "two blocks")
	commit := git("", "rev-parse", "HEAD")
	// The second block's X2 (line 47) changed, the index line naming the older blob.
	patch := "diff --git a/f.txt b/f.txt\nindex " + older + "..1111111111111111111111111111111111111111 100644\n--- a/f.txt\n+++ b/f.txt\n" +
		"@@ -46,3 +46,3 @@\n X1\n-X2\n+EVIL\n X3\n"
	base, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), dir, commit,
		[]stackPatch{{task: "impl", dispatch: "D1", patch: []byte(patch)}})
	if err != nil {
		t.Fatal(err)
	}
	// stackBaseAt writes its objects to the scratch repository; read the file the way the
	// gate does, by applying the same patch as is to the commit in a private index.
	idx := filepath.Join(t.TempDir(), "index")
	gate := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+idx, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gate("", "read-tree", commit)
	gate(patch, "apply", "--cached", "--whitespace=nowarn", "-")
	ran := gate("", "write-tree")
	if f := gate("", "cat-file", "blob", ran+":f.txt"); strings.Index(f, "EVIL") < strings.Index(f, "mz") {
		t.Fatalf("the gate's tree edits the first block:\n%s", f)
	}
	// The stacked base, rebuilt as the workspace and the gate rebuild it, has the same tree.
	st := stageAt(t.TempDir(), "d1")
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &Record{ID: "d1", Repo: dir, Revision: commit, StackBase: base}
	tree, err := buildGateTree(t.Context(), r, st, nil, []stackPatch{{task: "impl", dispatch: "D1", patch: []byte(patch)}})
	if err != nil {
		t.Fatal(err)
	}
	got, gerr := tree.git(t.Context(), nil, "rev-parse", base+"^{tree}")
	if gerr != nil {
		t.Fatal(gerr)
	}
	if strings.TrimSpace(string(got)) != ran {
		f, _ := tree.git(t.Context(), nil, "cat-file", "blob", base+":f.txt")
		t.Errorf("the stacked base's tree %s is not the tree the gate ran %s; its f.txt:\n%s", got, ran, f)
	}
}

// TestStack_ScratchSweep: a scratch repository an accept killed mid-build left behind is
// removed by a later stacked accept once it is older than stackScratchMaxAge, whatever its
// dispatch; a younger one (a build that may still run) is kept.
func TestStack_ScratchSweep(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{"01OLD": stackScratchMaxAge + time.Minute, "01NEW": stackScratchMaxAge - time.Minute} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "git", "objects"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	sweepStackScratch(dir, now)
	if _, err := os.Stat(filepath.Join(dir, "01OLD")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old scratch repository is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "01NEW")); err != nil {
		t.Errorf("the young scratch repository was swept: %v", err)
	}
	sweepStackScratch(filepath.Join(dir, "none"), now) // no directory: nothing to do
}
