package dispatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agora-dev/agora/internal/gitexec"
)

// The gate's tree is the base tree plus the stored patch, built on the host with git's own
// machinery and never by hand:
//
//  1. the base: the pinned commit checked out afresh exactly as the agent's workspace was
//     (clone, checkout, scrub), or an empty directory for a dispatch without a repository;
//  2. the patch is applied to a private index holding the base (`git apply --cached`: the
//     work tree is not touched, and git refuses paths beyond a symbolic link, outside the
//     tree or inside .git), which `write-tree` makes a tree;
//  3. the touched paths are what `diff-tree --no-renames` lists between the base tree and
//     that tree: every added, modified, deleted or mode-changed path, both sides of a
//     rename, symlinks and submodules alike, read from the effect and not from the patch's
//     text, so no spelling of a patch hides a path;
//  4. only after the protect check, `read-tree -m -u` moves the checkout from the base to
//     that tree (git's checkout: removals, links and modes as the tree says).
//
// info/attributes neutralises every attribute that transforms content (the worker captured
// the patch with the same line), so a .gitattributes in the patch cannot re-encode or
// convert a protected file it does not touch. The tree's git directory is the clone's own
// (the command may use git, as the agent could) or, without a repository, a private one
// beside the stage that the sandbox never sees.

// gateAttributes is the worker's capture line (worker/capture.go): content passes as is.
const gateAttributes = "* !text !eol !crlf !ident !filter !diff !working-tree-encoding\n"

// Names in the stage directory (or on its disk quota) of the gate's tree.
const (
	gateDir    = "verify"     // the tree, beside the agent's workspace
	gateGitDir = "verify.git" // the private git directory of a tree without a repository
	gateIndex  = "verify.idx" // the private index the patch is applied to
)

// maxGitMessage caps what a failed git step's message keeps.
const maxGitMessage = 2 << 10

// gateTree is a tree being built.
type gateTree struct {
	dir      string   // the work tree, bound as /agora/workspace
	gitDir   string   // "" for the clone's own .git
	base     string   // the base commit, or the empty tree
	tree     string   // base plus patch, "" without a patch
	touched  []string // paths the patch touches
	applyErr string   // why the patch does not apply, for a red verdict
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

// buildGateTree checks out the base and applies patch to a private index. A patch that does
// not apply is tree.applyErr; an error is the host's trouble.
func buildGateTree(ctx context.Context, r *Record, st *stage, patch []byte) (*gateTree, error) {
	ctx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	t := &gateTree{dir: st.gateDirOf()}
	vs := *st
	vs.workspace = t.dir
	if err := prepareWorkspace(ctx, r, &vs); err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return t, nil
	}
	if r.Repo == "" {
		t.gitDir = filepath.Join(st.dir, gateGitDir)
		if _, err := t.git(ctx, nil, "", "init", "--quiet", "--template="); err != nil {
			return nil, err
		}
		empty, err := t.git(ctx, nil, "", "hash-object", "-t", "tree", "/dev/null")
		if err != nil {
			return nil, err
		}
		t.base = strings.TrimSpace(string(empty))
	} else {
		t.base = r.Revision
	}
	info := filepath.Join(t.dotGit(), "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(info, "attributes"), []byte(gateAttributes), 0o600); err != nil {
		return nil, err
	}
	index := filepath.Join(st.dir, gateIndex)
	defer os.Remove(index)
	if _, err := t.git(ctx, nil, index, "read-tree", t.base); err != nil {
		return nil, err
	}
	if _, err := t.git(ctx, patch, index, "apply", "--cached", "--whitespace=nowarn", "-"); err != nil {
		var ge *gitError
		if errors.As(err, &ge) {
			t.applyErr = ge.msg
			return t, nil
		}
		return nil, err
	}
	tree, err := t.git(ctx, nil, index, "write-tree")
	if err != nil {
		return nil, err
	}
	t.tree = strings.TrimSpace(string(tree))
	names, err := t.git(ctx, nil, "", "diff-tree", "-r", "-z", "--no-renames", "--name-only", t.base, t.tree)
	if err != nil {
		return nil, err
	}
	for _, p := range bytes.Split(names, []byte{0}) {
		if len(p) > 0 {
			t.touched = append(t.touched, string(p))
		}
	}
	return t, nil
}

// checkout moves the work tree from the base to the patched tree.
func (t *gateTree) checkout(ctx context.Context) error {
	if t.tree == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	_, err := t.git(ctx, nil, "", "read-tree", "-m", "-u", t.base, t.tree)
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
// with stdin, and the private index when index is set.
func (t *gateTree) git(ctx context.Context, stdin []byte, index string, args ...string) ([]byte, error) {
	pre := []string{"-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.symlinks=true"}
	dir := t.dir
	if t.gitDir != "" {
		pre = append(pre, "--git-dir="+t.gitDir, "--work-tree="+t.dir)
		dir = filepath.Dir(t.gitDir)
	}
	cmd := gitexec.Command(ctx, dir, append(pre, args...)...)
	if index != "" {
		cmd.Env = append(cmd.Env, "GIT_INDEX_FILE="+index)
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > maxGitMessage {
			msg = msg[:maxGitMessage] + "..."
		}
		return nil, &gitError{step: args[0], msg: msg}
	}
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	return out.Bytes(), nil
}
