package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/dispatch/gitparse"
	"github.com/agora-dev/agora/internal/verdict"
)

// The gate's tree is the base tree plus the stored patch, built on the host with git's own
// machinery and never by hand, in as few git processes as it takes (the gate's overhead is
// mostly theirs):
//
//  1. the base: a new repository holding the pinned commit's history, fetched exactly as the
//     agent's workspace was, HEAD detached at it, nothing checked out; or, for a dispatch
//     without a repository, an empty directory and a private git directory beside the stage
//     that the sandbox never sees. A stacked dispatch's base is its stacked base, built
//     again here as for its workspace (stack.go) and checked against the one it was accepted
//     on: the tree holds its bases' work, and the touched paths are its own patch's alone;
//  2. the index is read from the base commit (or left empty) and the patch applied to it
//     alone (`git apply --cached`: the work tree is not touched, and git refuses paths beyond
//     a symbolic link, outside the tree or inside .git);
//  3. the touched paths are what `diff-index --cached --no-renames --ignore-submodules=none
//     --raw` lists between the base and that index: every added, modified, deleted or
//     mode-changed path, both sides of a rename, symlinks and submodules alike (whatever a
//     .gitmodules says to ignore), each with its mode before and after, read from
//     the effect and not from the patch's text, so no spelling of a patch hides a path; a
//     gate with changes that the patch leaves a symbolic link for also reads every link of the
//     patched index (ls-files, cat-file) to resolve its target inside the tree;
//  4. only after the protect and changes checks, `checkout-index -a` writes the index into the
//     empty work tree (git's checkout: links and modes as the index says; an index never
//     holds a path below a link).
//
// info/attributes neutralises every attribute that transforms content (the worker captured
// the patch with the same line), so a .gitattributes in the patch cannot re-encode or
// convert a file it does not touch: the tree holds the blobs' bytes exactly. It unsets merge
// too: a stack's three-way merges (stack.go) use git's own text merge in every build, as a
// branch's do (gitbranch), whatever driver (binary, union) a base's .gitattributes names.
// Accept's scratch repository is bare and never reads a .gitattributes of the tree; the
// workspace and the gate read theirs from the index.

// gateAttributes is the worker's capture line (worker/capture.go), plus !merge: content
// passes as is, and a merge is git's text merge.
const gateAttributes = "* !text !eol !crlf !ident !filter !diff !merge !working-tree-encoding\n"

// Names in the stage directory (or on its disk quota) of the gate's tree.
const (
	gateDir    = "verify"     // the tree, beside the agent's workspace
	gateGitDir = "verify.git" // the private git directory of a tree without a repository
	gateIndex  = "verify.idx" // a leftover of older agoras; removed with the stage
)

// emptyTree is git's empty tree (SHA-1), the base of a tree without a repository: its
// private git directory is SHA-1.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// privateGitConfig is the private git directory's config (the worker's capture writes the
// same layout).
const privateGitConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n" +
	"\tlogallrefupdates = false\n\tsymlinks = true\n\tignorecase = false\n"

// maxGitMessage caps what a failed git step's message keeps.
const maxGitMessage = 2 << 10

// gateTree is a tree being built.
type gateTree struct {
	dir     string   // the work tree, bound as /agora/workspace
	gitDir  string   // "" for the work tree's own .git
	base    string   // the base commit, or the empty tree
	touched []string // paths the patch touches
	// changes are the touched paths with their modes (in t.touched's order); a touched
	// link's Target is its blob id until links() reads it.
	changes  []verdict.Change
	applyErr string // why the patch does not apply, for a red verdict
	empty    bool   // nothing to check out: no repository and no patch
}

// gateDirOf is where the gate's tree lives: beside the agent's workspace, on the disk quota
// when there is one.
func (s *stage) gateDirOf() string { return filepath.Join(filepath.Dir(s.workspace), gateDir) }

// removeAgentTree deletes the agent's workspace and out directory once reconcile has stored
// what it keeps: their room on the quota goes to the gate's tree.
func (s *stage) removeAgentTree() {
	os.RemoveAll(s.workspace)
	os.RemoveAll(s.out)
}

// buildGateTree prepares the base (stack: a stacked dispatch's bases' patches, in order)
// and applies patch to its index. A patch that does not apply is tree.applyErr; an error is
// the host's trouble.
func buildGateTree(ctx context.Context, r *Record, st *stage, patch []byte, stack []stackPatch) (*gateTree, error) {
	ctx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	t := &gateTree{dir: st.gateDirOf(), base: r.Revision}
	vs := *st
	vs.workspace = t.dir
	if r.Repo != "" {
		if err := fetchPinned(ctx, r, &vs); err != nil {
			return nil, err
		}
		// What checkout --detach writes, without a process: the repository is agora's own.
		if err := os.WriteFile(filepath.Join(t.dir, ".git", "HEAD"), []byte(r.Revision+"\n"), 0o644); err != nil {
			return nil, err
		}
		if err := scrubGitDir(&vs, r.Repo); err != nil {
			return nil, err
		}
	} else {
		if err := os.MkdirAll(t.dir, 0o700); err != nil {
			return nil, err
		}
		t.gitDir, t.base = filepath.Join(st.dir, gateGitDir), emptyTree
		if err := newPrivateGitDir(t.gitDir); err != nil {
			return nil, err
		}
	}
	info := filepath.Join(t.dotGit(), "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(info, "attributes"), []byte(gateAttributes), 0o600); err != nil {
		return nil, err
	}
	if len(stack) > 0 {
		base, err := applyStack(ctx, t.git, t.base, r.Repo != "", stack)
		if err == nil {
			err = checkStackBase(r, base)
		}
		if err != nil {
			return nil, fmt.Errorf("the stacked base: %w", err)
		}
		t.base = base
		if r.Repo != "" {
			if err := os.WriteFile(filepath.Join(t.dir, ".git", "HEAD"), []byte(base+"\n"), 0o644); err != nil {
				return nil, err
			}
		}
	}
	if r.Repo != "" || len(stack) > 0 {
		if _, err := t.git(ctx, nil, "read-tree", t.base); err != nil {
			return nil, err
		}
	}
	if len(patch) == 0 {
		t.empty = r.Repo == "" && len(stack) == 0
		return t, nil
	}
	if _, err := t.git(ctx, patch, "apply", "--cached", "--whitespace=nowarn", "-"); err != nil {
		var ge *gitError
		if errors.As(err, &ge) {
			t.applyErr = ge.msg
			return t, nil
		}
		return nil, err
	}
	// --ignore-submodules=none: a .gitmodules entry with "ignore = all" (the base's or the
	// patch's own) would have git skip a gitlink added or bumped at its path.
	raw, err := t.git(ctx, nil, "diff-index", "--cached", "-z", "--no-renames", "--ignore-submodules=none", "--raw", "--no-abbrev", t.base)
	if err != nil {
		return nil, err
	}
	if t.changes, err = gitparse.RawDiff(raw); err != nil {
		return nil, err
	}
	for _, c := range t.changes {
		t.touched = append(t.touched, c.Path)
	}
	return t, nil
}

// hasNewLink reports whether the patch leaves a symbolic link at a path it touches.
func (t *gateTree) hasNewLink() bool {
	for _, c := range t.changes {
		if c.NewMode == verdict.ModeSymlink {
			return true
		}
	}
	return false
}

// maxLinks caps the symbolic links of a patched tree the changes check reads.
const maxLinks = 100_000

// links reads every symbolic link of the patched index (its path and target, in one
// ls-files and one cat-file), fills the targets of the touched links in t.changes (until
// then their blob ids), and returns the lookup the changes check resolves them through.
func (t *gateTree) links(ctx context.Context) (verdict.Links, error) {
	ctx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	ls, err := t.git(ctx, nil, "ls-files", "--stage", "-z")
	if err != nil {
		return nil, err
	}
	var paths, ids []string
	for _, rec := range bytes.Split(ls, []byte{0}) {
		// "MODE SHA STAGE\tPATH"
		meta, p, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok || !bytes.HasPrefix(meta, []byte("120000 ")) {
			continue
		}
		f := strings.Fields(string(meta))
		if len(f) != 3 {
			return nil, fmt.Errorf("git ls-files: record %q", meta)
		}
		if len(paths) == maxLinks {
			return nil, fmt.Errorf("the patched tree holds more than %d symbolic links", maxLinks)
		}
		paths, ids = append(paths, string(p)), append(ids, f[1])
	}
	targets := map[string]string{}
	if len(ids) > 0 {
		out, err := t.git(ctx, []byte(strings.Join(ids, "\n")+"\n"), "cat-file", "--batch")
		if err != nil {
			return nil, err
		}
		for i := range ids {
			// "SHA blob SIZE\n" CONTENT "\n"
			hdr, rest, ok := bytes.Cut(out, []byte{'\n'})
			f := strings.Fields(string(hdr))
			if !ok || len(f) != 3 || f[0] != ids[i] || f[1] != "blob" {
				return nil, fmt.Errorf("git cat-file: header %q for %s", hdr, ids[i])
			}
			n, err := strconv.Atoi(f[2])
			if err != nil || n < 0 || n+1 > len(rest) {
				return nil, fmt.Errorf("git cat-file: size %q for %s", f[2], ids[i])
			}
			targets[paths[i]] = string(rest[:n])
			out = rest[n+1:]
		}
	}
	for i := range t.changes {
		if c := &t.changes[i]; c.NewMode == verdict.ModeSymlink {
			c.Target = targets[c.Path]
		} else {
			c.Target = ""
		}
	}
	return func(p string) (string, bool) {
		s, ok := targets[p]
		return s, ok
	}, nil
}

// newPrivateGitDir lays out an empty repository at dir, as `git init --template=` would.
func newPrivateGitDir(dir string) error {
	for _, d := range []string{"objects", "refs/heads", "refs/tags", "info"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/gate\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config"), []byte(privateGitConfig), 0o600)
}

// checkout writes the index (the base plus the patch) into the empty work tree.
func (t *gateTree) checkout(ctx context.Context) error {
	if t.empty {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	_, err := t.git(ctx, nil, "checkout-index", "--all", "--force")
	return err
}

func (t *gateTree) dotGit() string {
	if t.gitDir != "" {
		return t.gitDir
	}
	return filepath.Join(t.dir, ".git")
}

// gitError is a git step that ran and refused: its (capped) message.
type gitError struct {
	step, msg string
}

func (e *gitError) Error() string { return "git " + e.step + ": " + e.msg }

// git runs one git step on the tree (through gitexec: no hooks, no user or system config),
// with stdin.
func (t *gateTree) git(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	dir, pre := t.dir, []string(nil)
	if t.gitDir != "" {
		pre = []string{"--git-dir=" + t.gitDir, "--work-tree=" + t.dir}
		dir = filepath.Dir(t.gitDir)
	}
	return gitIn(dir, nil, pre)(ctx, stdin, args...)
}
