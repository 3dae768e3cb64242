package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/agora-dev/agora/internal/gitexec"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/execrt"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// The patch is captured with a git repository the worker owns, outside the workspace
// (GIT_DIR in the private temp dir, the workspace as its work tree). The checkout's own .git
// is never consulted: git skips every entry named .git while walking a work tree, and with
// an explicit --git-dir it never looks for one. Its config, hooks, fsmonitor and filter
// drivers therefore cannot run anything. The system and global config are off (package
// gitexec: GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null, GIT_ATTR_NOSYSTEM,
// core.attributesFile /dev/null; core.excludesFile /dev/null here), and the repository's
// config is written by the worker, so no filter, diff or textconv driver is defined anywhere
// git looks: a .gitattributes in the workspace naming one ("* filter=evil") names nothing,
// and git runs no program.
//
// info/attributes, which outranks every .gitattributes, resets the attributes that would
// transform content on add (text, eol, crlf, ident, filter, working-tree-encoding) and the
// diff attribute, so the patch carries the workspace's bytes exactly; binary detection is
// git's own (a NUL in the first 8000 bytes) and --binary keeps binary files in the patch.
//
// Symlinks are recorded as symlinks (git never follows them), so a link to /etc/passwd in
// the workspace is a link in the patch, not the file's content. A directory that holds its
// own .git (a nested repository) is recorded as a gitlink: its files are not in the patch.
//
// The agent shares /tmp and could edit this repository while it runs; before capture the
// worker writes its config and info/attributes again and removes any hooks directory, so
// capture runs with the same settings as the baseline. (The agent runs code as the same user
// in the same sandbox already; this keeps capture predictable, it is not a boundary.)

const (
	gitConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n" +
		"\tlogallrefupdates = false\n\tsymlinks = true\n\tignorecase = false\n"
	gitAttributes = "* !text !eol !crlf !ident !filter !diff !working-tree-encoding\n"
	// maxGitStderr caps the git diagnostics kept for a failure detail.
	maxGitStderr = 1 << 10
)

// gitFlags go before every git subcommand: gitexec's (no hook, fsmonitor, signing, gc or
// outside attributes) and capture's own, so nothing the checkout or the environment
// configures can change what capture does.
var gitFlags = append(gitexec.Flags(),
	"-c", "core.untrackedCache=false",
	"-c", "core.autocrlf=false",
	"-c", "core.safecrlf=false",
	"-c", "core.excludesFile=/dev/null",
	"-c", "core.quotePath=true",
	"-c", "user.name=agora",
	"-c", "user.email=worker@agora.invalid",
)

// gitRuns counts the git processes the worker started; tests hold an empty workspace to none.
var gitRuns atomic.Int64

// gitDir is the worker's private repository.
type gitDir struct {
	git, dir, workTree string
	env                []string
	tree               string // the baseline tree
}

func newGitDir(tmp, workTree string) (*gitDir, error) {
	git, err := execrt.LookPath("git", agentPath)
	if err != nil {
		return nil, fmt.Errorf("find git: %w", err)
	}
	dir, err := os.MkdirTemp(tmp, "agora-baseline-*.git")
	if err != nil {
		return nil, err
	}
	g := &gitDir{
		git:      git,
		dir:      dir,
		workTree: workTree,
		env:      append([]string{"PATH=" + agentPath, "HOME=" + tmp, "LC_ALL=C"}, gitexec.IsolatedEnv()...),
	}
	// The repository layout git itself creates with `git init --template=`, written
	// directly to save a process per dispatch.
	for _, d := range []string{"objects", "refs/heads", "refs/tags", "info"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			g.remove()
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/baseline\n"), 0o600); err != nil {
		g.remove()
		return nil, err
	}
	if err := g.reassert(); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

// reassert writes the repository's settings again and removes hooks.
func (g *gitDir) reassert() error {
	if err := os.RemoveAll(filepath.Join(g.dir, "hooks")); err != nil {
		return err
	}
	for name, content := range map[string]string{"config": gitConfig, "info/attributes": gitAttributes, "info/exclude": ""} {
		p := filepath.Join(g.dir, name)
		if err := os.RemoveAll(p); err != nil { // whatever is there, even a symlink
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (g *gitDir) remove() { _ = os.RemoveAll(g.dir) }

// run runs one git subcommand with stdout to out (nil: discarded).
func (g *gitDir) run(ctx context.Context, out io.Writer, args ...string) error {
	return g.runStdin(ctx, nil, out, args...)
}

// runStdin is run with in as git's standard input.
func (g *gitDir) runStdin(ctx context.Context, in io.Reader, out io.Writer, args ...string) error {
	argv := append([]string{"--git-dir=" + g.dir, "--work-tree=" + g.workTree}, gitFlags...)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, g.git, argv...)
	gitRuns.Add(1)
	cmd.Dir = g.workTree
	cmd.Env = g.env
	cmd.Stdin = in
	cmd.Stdout = out
	var stderr headBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return fmt.Errorf("git %s: %v: %s", args[0], err, msg)
		}
		return fmt.Errorf("git %s: %v", args[0], err)
	}
	return nil
}

// emptyTree is git's empty tree in the SHA-1 object format the worker's repository uses.
// git knows it without storing it, so a diff against it needs no object.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// baseline records the workspace as it is now: the tree the patch is taken against. An
// empty workspace (a dispatch without a repository whose capabilities overlay no file) is
// the empty tree, recorded without running git: capture makes the repository only when the
// agent leaves something.
func (r *runner) baseline(ctx context.Context) *failure {
	empty, err := emptyDir(r.workspace)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "baseline: %v", err)
	}
	if empty {
		return nil
	}
	g, err := newGitDir(r.opts.TempDir, r.workspace)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "baseline: %v", err)
	}
	r.git = g
	if err := g.run(ctx, nil, "add", "-A"); err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "baseline: %v", err)
	}
	var out bytes.Buffer
	if err := g.run(ctx, &out, "write-tree"); err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "baseline: %v", err)
	}
	tree := strings.TrimSpace(out.String())
	if len(tree) != 40 && len(tree) != 64 {
		return fail(lifecycle.ReasonWorkerFailed, "baseline: git write-tree printed %q", agentrun.Truncate(tree, 100))
	}
	if _, err := hex.DecodeString(tree); err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "baseline: git write-tree printed %q", agentrun.Truncate(tree, 100))
	}
	g.tree = tree
	return nil
}

// emptyDir reports whether dir holds no entry at all (an empty directory is an entry: git
// would skip it, but this answer does not depend on what git skips).
func emptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// captureRepo returns the repository capture diffs with, or nil when the baseline was the
// empty workspace and the workspace is empty still: the patch is then empty, as git's diff
// of two empty trees is. When the agent left something the repository is made now, its
// baseline the empty tree.
func (r *runner) captureRepo() (*gitDir, error) {
	if r.git != nil {
		return r.git, r.git.reassert()
	}
	empty, err := emptyDir(r.workspace)
	if err != nil || empty {
		return nil, err
	}
	g, err := newGitDir(r.opts.TempDir, r.workspace)
	if err != nil {
		return nil, err
	}
	g.tree = emptyTree
	r.git = g
	return g, nil
}

// capture writes out/patch.diff: every change to the workspace since the baseline, as a
// binary-safe git diff (bytes written as git produces them, never decoded) that `git apply`
// accepts on the dispatched revision.
func (r *runner) capture(ctx context.Context) *failure {
	g, err := r.captureRepo()
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "capture: %v", err)
	}
	if g != nil {
		if err := g.run(ctx, nil, "add", "-A"); err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "capture: %v", err)
		}
		if err := r.maskBinarySecrets(ctx); err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "capture: mask secrets in binary files: %v", err)
		}
	}
	pw := newPatchWriter(r.opts.testOnlyMaxPatch)
	err = writeFileAtomic(r.out, wire.PatchFile, func(w io.Writer) error {
		pw.w = w
		if g == nil {
			return nil // nothing before, nothing after: the empty patch
		}
		args := append([]string{"diff", "--cached", "--binary", "--full-index", "--no-ext-diff",
			"--no-textconv", "--no-color", "--ignore-submodules=none", "--src-prefix=a/", "--dst-prefix=b/",
			g.tree, "--"}, excludePathspecs(r.overlaid)...)
		err := g.run(ctx, pw, args...)
		if pw.over {
			// git died of the closed pipe; the size is the reason.
			return &patchSizeError{limit: pw.limit}
		}
		return err
	})
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "capture: %v", err)
	}
	r.res.Patch = &wire.PatchInfo{
		Path:         wire.PatchFile,
		SHA256:       hex.EncodeToString(pw.h.Sum(nil)),
		Bytes:        pw.n,
		FilesChanged: pw.files,
	}
	return nil
}

// excludePathspecs leaves paths out of a diff: the overlaid files are the capabilities',
// whatever the agent did to them. Literal, so no character in a name is pathspec magic; top,
// so the working directory does not matter. With only exclusions git diffs everything else.
func excludePathspecs(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, ":(top,exclude,literal)"+p)
	}
	return out
}

// patchSizeError reports a patch over its limit (MaxPatchSize).
type patchSizeError struct{ limit int64 }

func (e *patchSizeError) Error() string {
	return fmt.Sprintf("the patch is over the %d byte limit", e.limit)
}

// patchWriter passes the patch through, hashing it, counting its bytes and its files (lines
// that start with "diff --git ": every other patch line starts with a space, +, -, @, \ or a
// header word, and base85 lines of binary patches never hold a space), and refusing to go
// past MaxPatchSize.
type patchWriter struct {
	w     io.Writer
	h     hash.Hash
	n     int64
	files int
	limit int64
	over  bool
	// matched is how much of the header prefix the current line has matched so far, or
	// -1 when the line cannot be a header.
	matched int
}

const fileHeader = "diff --git "

func newPatchWriter(limit int64) *patchWriter {
	if limit <= 0 {
		limit = wire.MaxPatchSize
	}
	return &patchWriter{h: sha256.New(), limit: limit}
}

func (p *patchWriter) Write(b []byte) (int, error) {
	if p.n+int64(len(b)) > p.limit {
		p.over = true
		return 0, &patchSizeError{limit: p.limit}
	}
	for _, c := range b {
		switch {
		case c == '\n':
			p.matched = 0
		case p.matched >= 0 && p.matched < len(fileHeader):
			if c == fileHeader[p.matched] {
				p.matched++
				if p.matched == len(fileHeader) {
					p.files++
				}
			} else {
				p.matched = -1
			}
		}
	}
	p.h.Write(b)
	p.n += int64(len(b))
	return p.w.Write(b)
}

// headBuffer keeps the first maxGitStderr bytes written to it.
type headBuffer struct{ bytes.Buffer }

func (c *headBuffer) Write(b []byte) (int, error) {
	if room := maxGitStderr - c.Len(); room > 0 {
		c.Buffer.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}
