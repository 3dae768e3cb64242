package dispatch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/verdict"
)

// Attacks on the stacked base (stack.go): hostile upstream agents write the patches a stack is
// built from, and the host builds it three times (accept's scratch repository, the
// workspace, the verify gate), each of which must give the same commit or refuse.

// rtRepo is a repository under attack: files are written, committed and diffed with git
// itself, outside agora, as an agent's capture would see them.
type rtRepo struct {
	t   *testing.T
	dir string
}

func newRTRepo(t *testing.T) *rtRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed (apt-get install git)")
	}
	r := &rtRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q")
	return r
}

func (r *rtRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@a", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@a",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

func (r *rtRepo) write(name, body string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// commit commits everything and returns the commit id.
func (r *rtRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-qm", msg)
	return strings.TrimSpace(r.git("rev-parse", "HEAD"))
}

// patch is the work done since the last reset, as a worker captures it (binary, full index,
// no renames), and resets the tree to at.
func (r *rtRepo) patch(at string) []byte {
	r.t.Helper()
	r.git("add", "-A")
	p := r.git("diff", "--cached", "--binary", "--full-index", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/")
	r.git("reset", "-q", "--hard", at)
	r.git("clean", "-qfdx")
	return []byte(p)
}

// lines is n numbered lines, one per line.
func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// cleanGit runs git in dir with an environment of its own (whatever the test set in the
// process's), for reading what a build left.
func cleanGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// builds is what threeBuilds did: accept's base (a commit, or a tree without a repository),
// the git directory that holds its objects afterwards, and each build's error.
type builds struct {
	base                         string
	gitDir                       string
	acceptErr, stageErr, gateErr error
}

func (b builds) ok() bool { return b.acceptErr == nil && b.stageErr == nil && b.gateErr == nil }

func (b builds) String() string {
	return fmt.Sprintf("accept: %v; workspace: %v; gate: %v", b.acceptErr, b.stageErr, b.gateErr)
}

// show runs git on the objects the builds wrote.
func (b builds) show(t *testing.T, args ...string) string {
	t.Helper()
	return cleanGit(t, b.gitDir, args...)
}

// threeBuilds builds patches' stack on rev as accept does, then as staging and the gate do
// on a record that says accept's base; each of the later two must build accept's base again.
func threeBuilds(t *testing.T, repo, rev string, patches []stackPatch) builds {
	t.Helper()
	var b builds
	b.base, b.acceptErr = stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), repo, rev, patches)
	if b.acceptErr != nil {
		return b
	}
	r := &Record{ID: "d1", Repo: repo, Revision: rev, StackBase: b.base}
	st := stageAt(t.TempDir(), "d1")
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b.stageErr = prepareWorkspace(t.Context(), r, st, patches)
	if b.stageErr == nil && repo != "" {
		if head := strings.TrimSpace(cleanGit(t, st.workspace, "rev-parse", "HEAD")); head != b.base {
			b.stageErr = fmt.Errorf("the workspace's HEAD is %s, accept's base %s", head, b.base)
		}
	}
	gst := stageAt(t.TempDir(), "d1")
	if err := os.MkdirAll(gst.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tree, err := buildGateTree(t.Context(), r, gst, nil, patches)
	if err == nil && tree.base != b.base {
		err = fmt.Errorf("the gate's base is %s, accept's %s", tree.base, b.base)
	}
	b.gateErr = err
	b.gitDir = filepath.Join(gst.dir, gateGitDir)
	if repo != "" {
		b.gitDir = filepath.Join(gst.gateDirOf(), ".git")
	}
	return b
}

// A base's agent writes a .gitattributes that picks a merge driver for a file two bases
// edit apart (lines 8 and 10: the later patch needs a three-way merge). Accept's scratch
// repository is bare and reads no .gitattributes from the tree; the workspace and the gate
// read it from their index. Built with git's own text merge everywhere (as `orch patches
// --branch` merges), the three builds agree: `-merge`, `binary` and `merge=binary` would
// otherwise make the workspace refuse a stack accept recorded as building (stack-conflict
// after staging started), and `merge=union` a conflict merge silently where accept refused.
func TestRedTeam44S_MergeAttributeSameEverywhere(t *testing.T) {
	for _, attr := range []string{"f.txt -merge", "f.txt binary", "f.txt merge=binary", "* merge=union", "f.txt merge=nosuchdriver"} {
		t.Run(attr, func(t *testing.T) {
			r := newRTRepo(t)
			r.write("f.txt", lines(20))
			rev := r.commit("base")
			r.write(".gitattributes", attr+"\n")
			r.write("f.txt", strings.Replace(lines(20), "\n8\n", "\neight\n", 1))
			a := r.patch(rev)
			r.write("f.txt", strings.Replace(lines(20), "\n10\n", "\nten\n", 1))
			b := r.patch(rev)
			patches := []stackPatch{{task: "a", dispatch: "DA", patch: a}, {task: "b", dispatch: "DB", patch: b}}
			b3 := threeBuilds(t, r.dir, rev, patches)
			if !b3.ok() {
				t.Fatal(b3)
			}
			if got := b3.show(t, "cat-file", "-p", b3.base+":f.txt"); !strings.Contains(got, "eight") || !strings.Contains(got, "ten") {
				t.Errorf("f.txt at the stacked base:\n%s", got)
			}

			// Two bases that change the same line differently conflict in every build,
			// whatever merge driver a base's attributes name.
			r.write(".gitattributes", attr+"\n")
			r.write("f.txt", strings.Replace(lines(20), "\n9\n", "\nnine by a\n", 1))
			a = r.patch(rev)
			r.write("f.txt", strings.Replace(lines(20), "\n9\n", "\nnine by b\n", 1))
			b = r.patch(rev)
			patches = []stackPatch{{task: "a", dispatch: "DA", patch: a}, {task: "b", dispatch: "DB", patch: b}}
			var ce *StackConflictError
			if _, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), r.dir, rev, patches); !errors.As(err, &ce) || ce.Task != "b" {
				t.Errorf("accept of two bases that change line 9: %v", err)
			}
			rec := &Record{ID: "d1", Repo: r.dir, Revision: rev, StackBase: rev}
			st := stageAt(t.TempDir(), "d1")
			os.MkdirAll(st.dir, 0o700)
			if err := prepareWorkspace(t.Context(), rec, st, patches); !errors.As(err, &ce) {
				t.Errorf("staging two bases that change line 9 (a union would merge them): %v", err)
			}
		})
	}
}

// The host's and the caller's git settings do not reach a stack's build: a user config
// (autocrlf, apply.whitespace=fix, commit signing, a commit encoding, hooks), GIT_CONFIG_*
// and GIT_* variables that would point git elsewhere or date its commits, the time zone, and
// the source repository's own config, hooks and merge driver. The same stack gives the same
// commit with and without them, in all three builds, and nothing they name runs.
func TestRedTeam44S_HostGitSettingsDoNotMoveTheBase(t *testing.T) {
	r := newRTRepo(t)
	r.write("f.txt", lines(20))
	rev := r.commit("base")
	r.write("f.txt", strings.Replace(lines(20), "\n8\n", "\neight  \n", 1))
	r.write("crlf.txt", "one\r\ntwo\r\n")
	r.write(".gitattributes", "* merge=evil\n")
	a := r.patch(rev)
	r.write("f.txt", strings.Replace(lines(20), "\n10\n", "\nten\t\n", 1))
	b := r.patch(rev)
	patches := []stackPatch{{task: "a", dispatch: "DA", patch: a}, {task: "b", dispatch: "DB", patch: b}}
	first := threeBuilds(t, r.dir, rev, patches)
	if !first.ok() {
		t.Fatal(first)
	}
	clean := first.base

	marker := filepath.Join(t.TempDir(), "ran")
	hook := "#!/bin/sh\necho ran >> " + marker + "\ncat >/dev/null\nexit 0\n"
	bin := t.TempDir()
	for _, name := range []string{"hook", "driver", "gpg"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config := "[core]\n\tautocrlf = true\n\thooksPath = " + bin + "\n\tattributesFile = " + filepath.Join(bin, "attrs") + "\n" +
		"[apply]\n\twhitespace = fix\n[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = " + filepath.Join(bin, "gpg") + "\n" +
		"[i18n]\n\tcommitEncoding = ISO-8859-1\n[merge \"evil\"]\n\tdriver = " + filepath.Join(bin, "driver") + " %O %A %B\n" +
		"[user]\n\tname = evil\n\temail = evil@evil\n"
	os.WriteFile(filepath.Join(bin, "attrs"), []byte("* merge=evil text eol=crlf\n"), 0o644)
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(config), 0o644)
	// The source repository's own settings and hooks (the scratch repository reads its
	// objects; the workspace and the gate fetch from it).
	f, err := os.OpenFile(filepath.Join(r.dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(config)
	f.Close()
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction", "post-checkout", "pre-auto-gc"} {
		os.WriteFile(filepath.Join(r.dir, ".git", "hooks", h), []byte(hook), 0o755)
	}
	for k, v := range map[string]string{
		"HOME": home, "XDG_CONFIG_HOME": home, "GIT_CONFIG_GLOBAL": filepath.Join(home, ".gitconfig"), "GIT_CONFIG_SYSTEM": filepath.Join(home, ".gitconfig"),
		"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.autocrlf", "GIT_CONFIG_VALUE_0": "true",
		"GIT_CONFIG_PARAMETERS": "'apply.whitespace'='fix'",
		"GIT_AUTHOR_DATE":       "@1 +1400", "GIT_COMMITTER_DATE": "@1 +1400", "GIT_AUTHOR_NAME": "evil", "GIT_COMMITTER_NAME": "evil",
		"TZ": "Asia/Kathmandu", "GIT_DIR": filepath.Join(home, "nope"), "GIT_WORK_TREE": home, "GIT_INDEX_FILE": filepath.Join(home, "idx"),
		"GIT_OBJECT_DIRECTORY": filepath.Join(home, "objects"), "GIT_ALTERNATE_OBJECT_DIRECTORIES": filepath.Join(home, "alt"),
		"GIT_NAMESPACE": "evil", "GIT_EXEC_PATH": bin, "GIT_TRACE": filepath.Join(home, "trace"),
	} {
		t.Setenv(k, v)
	}
	second := threeBuilds(t, r.dir, rev, patches)
	if !second.ok() {
		t.Fatalf("with the host's settings: %v", second)
	}
	if again := second.base; again != clean {
		t.Errorf("the same stack is %s with the host's git settings, %s without", again, clean)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("a hook, driver or signing program ran:\n%s", b)
	}
	for _, p := range []string{"idx", "objects", "trace", "nope"} {
		if _, err := os.Stat(filepath.Join(home, p)); err == nil {
			t.Errorf("git wrote %s where the host's GIT_* variables point", p)
		}
	}
	body := second.show(t, "cat-file", "commit", clean)
	for _, want := range []string{"author agora <agora@agora.invalid> ", "committer agora <agora@agora.invalid> ", "Agora-Task: b\n", "Agora-Dispatch: DB\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("the stack's commit lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"gpgsig", "encoding", "evil"} {
		if strings.Contains(body, bad) {
			t.Errorf("the stack's commit holds %q:\n%s", bad, body)
		}
	}
	crlf := second.show(t, "cat-file", "-p", clean+":crlf.txt")
	if crlf != "one\r\ntwo\r\n" {
		t.Errorf("crlf.txt at the base = %q, want the patch's bytes", crlf)
	}
}

// A run commit with an unusual committer line (a zone of -0130, the epoch, a Latin-1
// encoding header and message): the stack's commits take its date as git wrote it, and the
// three builds agree.
func TestRedTeam44S_OddRunCommitSameEverywhere(t *testing.T) {
	r := newRTRepo(t)
	r.write("f.txt", "one\n")
	r.git("add", "-A")
	tree := strings.TrimSpace(r.git("write-tree"))
	body := "tree " + tree + "\nauthor \xe9 <a@a> 0 -0130\ncommitter \xe9 <a@a> 0 -0130\nencoding ISO-8859-1\n\nmessage \xe9\n"
	if err := os.WriteFile(filepath.Join(r.dir, ".git", "odd"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	rev := strings.TrimSpace(r.git("hash-object", "-t", "commit", "-w", ".git/odd"))
	r.git("update-ref", "refs/heads/odd", rev)
	r.git("reset", "-q", "--hard", rev)
	r.write("f.txt", "one\ntwo\n")
	a := r.patch(rev)
	b3 := threeBuilds(t, r.dir, rev, []stackPatch{{task: "a", dispatch: "DA", patch: a}})
	if !b3.ok() {
		t.Fatal(b3)
	}
	if c := b3.show(t, "cat-file", "commit", b3.base); !strings.Contains(c, "committer agora <agora@agora.invalid> 0 -0130\n") || strings.Contains(c, "encoding") {
		t.Errorf("the stack's commit on an odd run commit:\n%s", c)
	}
}

// Bases of every kind git's patches carry: a binary file (added, then changed by a delta on
// top), a mode change, a symbolic link, a submodule's gitlink, a deletion, CRLF lines and no
// final newline. The three builds agree, with and without a repository.
func TestRedTeam44S_ExoticBasesSameEverywhere(t *testing.T) {
	for _, withRepo := range []bool{true, false} {
		t.Run(fmt.Sprintf("repository=%v", withRepo), func(t *testing.T) {
			r := newRTRepo(t)
			rev := ""
			if withRepo {
				r.write("run.sh", "echo hi\n")
				r.write("gone.txt", "bye\n")
				rev = r.commit("base")
			} else {
				rev = r.commit2empty()
			}
			bin := make([]byte, 4096)
			for i := range bin {
				bin[i] = byte(i * 7)
			}
			r.write("blob.bin", string(bin))
			r.write("crlf.txt", "a\r\nb\r\n")
			r.write("nonl.txt", "no newline")
			if err := os.Symlink("crlf.txt", filepath.Join(r.dir, "link")); err != nil {
				t.Fatal(err)
			}
			if withRepo {
				os.Chmod(filepath.Join(r.dir, "run.sh"), 0o755)
				os.Remove(filepath.Join(r.dir, "gone.txt"))
			}
			r.git("add", "-A")
			sub := strings.Repeat("ab", 20)
			r.git("update-index", "--add", "--cacheinfo", "160000,"+sub+",vendor/sub")
			first := []byte(r.git("diff", "--cached", "--binary", "--full-index", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/"))
			mid := r.commit("first")
			bin[100], bin[2000] = 1, 2
			r.write("blob.bin", string(bin))
			r.write("crlf.txt", "a\r\nb changed\r\n")
			second := r.patch(mid)
			r.git("reset", "-q", "--hard", rev)
			patches := []stackPatch{{task: "first", dispatch: "D1", patch: first}, {task: "second", dispatch: "D2", patch: second}}
			repo, at := r.dir, rev
			if !withRepo {
				repo, at = "", ""
			}
			b3 := threeBuilds(t, repo, at, patches)
			if !b3.ok() {
				t.Fatal(b3)
			}
			ls := b3.show(t, "ls-tree", "-r", b3.base)
			for _, want := range []string{"120000 blob", "\tlink", "160000 commit " + sub + "\tvendor/sub", "\tblob.bin", "\tnonl.txt"} {
				if !strings.Contains(ls, want) {
					t.Errorf("the stacked base lacks %q:\n%s", want, ls)
				}
			}
			if withRepo && (!strings.Contains(ls, "100755 blob") || strings.Contains(ls, "gone.txt")) {
				t.Errorf("the mode change or the deletion is not in the base:\n%s", ls)
			}
			if got := b3.show(t, "cat-file", "-p", b3.base+":blob.bin"); got != string(bin) {
				t.Error("blob.bin at the base is not the second base's bytes")
			}
		})
	}
}

// commit2empty makes a commit of nothing, for the stack without a repository: the patches
// are made on the empty tree, and the repository only holds their objects for the test.
func (r *rtRepo) commit2empty() string {
	r.t.Helper()
	r.git("commit", "-q", "--allow-empty", "-m", "empty")
	return strings.TrimSpace(r.git("rev-parse", "HEAD"))
}

// A stacked task's own patch that deletes, renames or reverts its base's work: that is a
// change of its own, so the gate's touched paths name the base's files, a changes list that
// does not admit them is red and protect catches them; nothing of the base that the patch
// leaves alone is counted.
func TestRedTeam44S_OwnPatchOnUpstreamWorkIsItsOwn(t *testing.T) {
	r := newRTRepo(t)
	r.write("README", "app\n")
	rev := r.commit("base")
	r.write("lib.txt", "reviewed work\n")
	r.write("keep.txt", "kept\n")
	impl := r.patch(rev)
	cmd := exec.Command("git", "-C", r.dir, "apply", "--index")
	cmd.Stdin = strings.NewReader(string(impl))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	implCommit := r.commit("impl")
	stack := []stackPatch{{task: "impl", dispatch: "DI", patch: impl}}
	base, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), r.dir, rev, stack)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]func(){
		"delete": func() { os.Remove(filepath.Join(r.dir, "lib.txt")) },
		"rename": func() { os.Rename(filepath.Join(r.dir, "lib.txt"), filepath.Join(r.dir, "docs", "lib.txt")) },
		"revert": func() { r.write("lib.txt", "") },
	}
	want := map[string][]string{"delete": {"lib.txt"}, "rename": {"docs/lib.txt", "lib.txt"}, "revert": {"lib.txt"}}
	for name, edit := range own {
		t.Run(name, func(t *testing.T) {
			os.MkdirAll(filepath.Join(r.dir, "docs"), 0o755)
			r.write("docs/guide.md", "how to\n")
			edit()
			p := r.patch(implCommit)
			rec := &Record{ID: "d1", Repo: r.dir, Revision: rev, StackBase: base}
			gst := stageAt(t.TempDir(), "d1")
			os.MkdirAll(gst.dir, 0o700)
			tree, err := buildGateTree(t.Context(), rec, gst, p, stack)
			if err != nil || tree.applyErr != "" {
				t.Fatalf("gate tree: %v %s", err, tree.applyErr)
			}
			touched := slices.Clone(tree.touched)
			slices.Sort(touched)
			if w := append([]string{"docs/guide.md"}, want[name]...); !slices.Equal(touched, slices.Sorted(slices.Values(w))) {
				t.Errorf("touched %q, want %q", touched, w)
			}
			off, err := admit(t.Context(), verdict.Spec{Command: []string{"true"}, Changes: []string{"docs/guide.md"}}, tree)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, o := range off {
				paths = append(paths, o.Path)
			}
			if !slices.Contains(paths, "lib.txt") || slices.Contains(paths, "keep.txt") {
				t.Errorf("changes: [docs/guide.md] found %q outside; want lib.txt and never keep.txt", paths)
			}
			if hits, _ := protectedPaths([]string{"lib.txt", "keep.txt"}, tree.touched); !slices.Equal(hits, []string{"lib.txt"}) {
				t.Errorf("protect [lib.txt, keep.txt] hit %q, want [lib.txt]", hits)
			}
		})
	}
}

// A scratch repository a crash left under dispatches/.stack/ID (a half-built one, a file, a
// symbolic link to a directory of the host's): accepting the same dispatch again builds the
// stack from nothing, never through the link, and leaves no scratch behind.
func TestRedTeam44S_ScratchLeftByACrash(t *testing.T) {
	sr := newStackRepo(t)
	patches := []stackPatch{{task: "impl", dispatch: "D1", patch: sr.impl}, {task: "docs", dispatch: "D2", patch: sr.docs}}
	want, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), sr.dir, sr.commit, patches)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, leave := range map[string]func(scratch string){
		"half-built": func(s string) {
			os.MkdirAll(filepath.Join(s, "git", "objects", "ab"), 0o700)
			os.WriteFile(filepath.Join(s, "git", "objects", "ab", "cdef"), []byte("junk"), 0o600)
			os.WriteFile(filepath.Join(s, "git", "config"), []byte("[core]\n\tbare = false\n\thooksPath = /tmp\n"), 0o600)
			os.WriteFile(filepath.Join(s, "index"), []byte("not an index"), 0o600)
		},
		"a file": func(s string) { os.WriteFile(s, []byte("x"), 0o600) },
		"a link": func(s string) { os.Symlink(outside, s) },
	} {
		t.Run(name, func(t *testing.T) {
			state := t.TempDir()
			scratch := filepath.Join(state, stackScratchDir, "01JCRASHED")
			os.MkdirAll(filepath.Dir(scratch), 0o700)
			leave(scratch)
			got, err := stackBaseAt(t.Context(), scratch, sr.dir, sr.commit, patches)
			if err != nil || got != want {
				t.Fatalf("built again over the leftover: %s, %v; want %s", got, err, want)
			}
			if _, err := os.Lstat(scratch); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the scratch repository is left: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "mine\n" {
				t.Errorf("the link's target: %q, %v", b, err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Errorf("the link's target holds %d entries, want its own one", len(ents))
			}
		})
	}
}

// A base patch with no merge base in reach: it does not apply as is, and the blobs its index
// line names are in no repository (it was made on another tree), so the three-way fallback
// has nothing to merge from. It is a conflict naming the task, never a host error (which the
// engine would retry): the dispatch fails stack-conflict and its agent never runs.
func TestRedTeam44S_NoMergeBaseIsAConflict(t *testing.T) {
	sr := newStackRepo(t)
	foreign := []byte("diff --git a/lib.txt b/lib.txt\nindex " + strings.Repeat("1", 40) + ".." + strings.Repeat("2", 40) + " 100644\n" +
		"--- a/lib.txt\n+++ b/lib.txt\n@@ -1,2 +1,2 @@\n elsewhere\n-two\n+three\n")
	for _, repo := range []string{sr.dir, ""} {
		rev := sr.commit
		if repo == "" {
			rev = ""
		}
		_, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), repo, rev,
			[]stackPatch{{task: "impl", dispatch: "D1", patch: sr.impl}, {task: "foreign", dispatch: "D9", patch: foreign}})
		var ce *StackConflictError
		if !errors.As(err, &ce) || ce.Task != "foreign" || !slices.Equal(ce.On, []string{"impl"}) || ce.Git == "" {
			t.Errorf("repo %q: a patch with no merge base: %#v", repo, err)
		}
	}
	// Not a patch at all, and a patch git refuses outright (a path in .git): conflicts too.
	for name, p := range map[string]string{
		"not a patch": "hello\n",
		"into .git":   "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+touch /tmp/pwned\n",
		"into .GIT":   "diff --git a/.GIT/config b/.GIT/config\nnew file mode 100644\n--- /dev/null\n+++ b/.GIT/config\n@@ -0,0 +1 @@\n+x\n",
		"above":       "diff --git a/../up.txt b/../up.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../up.txt\n@@ -0,0 +1 @@\n+x\n",
	} {
		_, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), sr.dir, sr.commit, []stackPatch{{task: "evil", dispatch: "D1", patch: []byte(p)}})
		var ce *StackConflictError
		if !errors.As(err, &ce) || ce.Task != "evil" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A stack's patches are read from the blob store one at a time, as each is applied, never
// all at once: a plan's chain of 256 tasks that each left a patch at the 64 MiB cap would
// otherwise have accept (in serve), staging and the gate each hold 16 GiB. Reading them
// names no patch bytes until the build; a blob that is gone, or is not the bytes its digest
// names, still refuses the dispatch at accept (a request error, never a conflict).
func TestRedTeam44S_StackPatchesReadOneAtATime(t *testing.T) {
	r := newRTRepo(t)
	r.write("README", "app\n")
	rev := r.commit("base")
	blobs := filepath.Join(t.TempDir(), "blobs")
	store, err := blob.Open(blobs)
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 8, 2 << 20
	var inputs []Input
	var eager []stackPatch
	line := strings.Repeat("x", 1023) + "\n"
	for i := range n {
		r.write(fmt.Sprintf("big%d.txt", i), strings.Repeat(line, size/len(line)))
		p := r.patch(rev)
		d, err := store.Put(p)
		if err != nil {
			t.Fatal(err)
		}
		task, disp := fmt.Sprintf("t%d", i), fmt.Sprintf("D%d", i)
		inputs = append(inputs, Input{Key: "base", Select: "patch", Dir: task, FromDispatch: disp, Stack: true,
			Files: []InputFile{{Path: PatchFile, Digest: d, Size: int64(len(p))}}})
		eager = append(eager, stackPatch{task: task, dispatch: disp, patch: p})
	}
	want, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), r.dir, rev, eager)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{Blobs: store, StateDir: t.TempDir()}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	patches, err := d.stackPatches(inputs)
	runtime.ReadMemStats(&after)
	if err != nil || len(patches) != n {
		t.Fatalf("stackPatches: %d, %v", len(patches), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got >= size {
		t.Errorf("reading the stack's %d patches allocated %d bytes: they are held all at once (one is %d)", n, got, size)
	}
	base, conflict, err := d.stackBase(t.Context(), "01JSTACKREAD", r.dir, rev, inputs)
	if err != nil || conflict != "" || base != want {
		t.Fatalf("the stack read lazily: %s, %q, %v; want %s", base, conflict, err, want)
	}

	// A blob changed under the store, and one gone: refused at accept, as a request.
	blobPathOf := func(i int) string {
		h := inputs[i].Files[0].Digest.Hex()
		return filepath.Join(blobs, "sha256", h[:2], h)
	}
	for name, spoil := range map[string]func(){
		"changed": func() {
			p := blobPathOf(3)
			os.Chmod(p, 0o600)
			os.WriteFile(p, []byte("diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+forged\n"), 0o400)
		},
		"gone": func() { os.Remove(blobPathOf(5)) },
	} {
		spoil()
		_, conflict, err := d.stackBase(t.Context(), "01JSTACKREAD", r.dir, rev, inputs)
		var re *RequestError
		if !errors.As(err, &re) || conflict != "" {
			t.Errorf("%s blob: %q, %v; want a request error", name, conflict, err)
		}
	}
}

// A base's agent names a file with a terminal escape and a newline, and two bases conflict
// on it: git's words, kept in the dispatch's detail, hold the name as git printed it, and
// every place a person reads a detail (agenttext) shows it without the escape.
func TestRedTeam44S_ConflictDetailWithControlCharacters(t *testing.T) {
	r := newRTRepo(t)
	name := "e\x1b[31mred\nz"
	r.write(name, "x\n")
	rev := r.commit("base")
	r.write(name, "a\n")
	a := r.patch(rev)
	r.write(name, "b\n")
	b := r.patch(rev)
	_, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), r.dir, rev,
		[]stackPatch{{task: "a", dispatch: "DA", patch: a}, {task: "b", dispatch: "DB", patch: b}})
	var ce *StackConflictError
	if !errors.As(err, &ce) || ce.Task != "b" {
		t.Fatalf("two bases on one line of %q: %v", name, err)
	}
	if shown := agenttext.Escape(ce.Error()); strings.ContainsAny(shown, "\x1b") || !strings.Contains(shown, "red") {
		t.Errorf("the detail as shown: %q", shown)
	}
}

// A repository whose path holds a ':' (GIT_ALTERNATE_OBJECT_DIRECTORIES separates entries
// with it) or a '"': accept's scratch repository still reads its objects, and the stack
// builds as it does anywhere else.
func TestRedTeam44S_RepositoryPathWithColon(t *testing.T) {
	sr := newStackRepo(t)
	patches := []stackPatch{{task: "impl", dispatch: "D1", patch: sr.impl}, {task: "docs", dispatch: "D2", patch: sr.docs}}
	want, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), sr.dir, sr.commit, patches)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a:b", `say "hi"`, `"quoted`, "x:" + sr.dir, `back\slash:`, "new\nline:", "tab\t:\x7f"} {
		repo := filepath.Join(t.TempDir(), name, "repo")
		if err := os.MkdirAll(filepath.Dir(repo), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", sr.dir, repo).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got, err := stackBaseAt(t.Context(), filepath.Join(t.TempDir(), "scratch"), repo, sr.commit, patches)
		if err != nil || got != want {
			t.Errorf("repository %q: %s, %v; want %s", repo, got, err, want)
		}
	}
}
