// Package gitbranch turns reviewed work into git history without touching anyone's checkout:
// each change (a dispatch's patch) becomes one commit on a new branch, applied onto the
// branch so far as it is (the tree its verify gate ran, on its base), or with a three-way
// merge where it does not apply as is, in the order given. Everything happens in git's
// plumbing with a private index: the repository's working tree, index, HEAD and current
// branch are never read or written, nothing is pushed, and hooks and the user's
// configuration never run (package gitexec). A conflict creates no ref at all.
//
// The merges run in a private git directory that shares only the repository's object store
// (GIT_OBJECT_DIRECTORY): its config and info/attributes are written here, and it has no
// hooks. So nothing the repository configures can name a program for git to run while it
// merges and commits: not a merge, filter or diff driver in .git/config (which a
// .gitattributes in the tree, or in an agent's patch, would select), not gpg, not a hook.
// The repository's own git directory is only read (where its objects are, their format, its
// core.sharedRepository, whether the branch exists) and given one create-only update-ref,
// hooks off. Commits are laid out and hashed here and stored by one git process (commit.go).
package gitbranch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/gitexec"
)

// Change is one commit to make.
type Change struct {
	// Label names the change in a conflict report ("task fix-b (dispatch 01J...)").
	Label   string
	Patch   []byte // a git diff --binary --full-index against Base (empty: no commit)
	Author  Signature
	Message string
}

// Signature is a commit's author.
type Signature struct{ Name, Email string }

// committer is who writes every commit.
var committer = Signature{Name: "agora", Email: "agora@agora.invalid"}

// Options say what to build.
type Options struct {
	Repo    string // a git repository (its top directory or a bare one)
	Base    string // the full commit id the changes were made against
	Changes []Change
	// When dates every commit, so the same changes give the same commits; zero is now.
	When time.Time
}

// Result is the branch made.
type Result struct {
	Ref     string   // refs/heads/NAME
	Head    string   // the last commit (Base when no change had a patch)
	Commits []string // one per change with a patch that changed the tree, in order
	// Unchanged are the labels of the changes whose patch left the tree as the changes before
	// it made it (two tasks made the same edit): they get no commit, never an empty one.
	Unchanged []string
}

// ConflictError is a change that does not apply onto the branch so far.
type ConflictError struct {
	Label string
	Files []string // the paths left unmerged, sorted; may be empty when git named none
	Git   string   // git's own words, bounded
}

func (e *ConflictError) Error() string {
	files := "(git named no file; see its message)"
	if len(e.Files) > 0 {
		files = strings.Join(e.Files, ", ")
	}
	return fmt.Sprintf("%s does not apply onto the changes before it: conflict in %s; nothing was created", e.Label, files)
}

// ErrBranchExists is returned when the branch is there already: nothing is replaced.
var ErrBranchExists = errors.New("branch exists")

// Create makes branch (a name for refs/heads/) with one commit per change. It refuses a
// branch that exists, and creates nothing when any change conflicts.
func Create(ctx context.Context, branch string, o Options) (Result, error) {
	if err := CheckBranchName(branch); err != nil {
		return Result{}, err
	}
	ref := "refs/heads/" + branch
	b, err := newBuilder(ctx, o)
	if err != nil {
		return Result{}, err
	}
	defer b.close()
	if _, err := b.inRepo(ctx, "rev-parse", "--verify", "--quiet", ref); err == nil {
		return Result{}, fmt.Errorf("%w: %s is already in the repository; pick another --branch, or delete it first (git branch -D %s)", ErrBranchExists, branch, branch)
	}
	res := Result{Ref: ref, Head: o.Base}
	last, err := b.writeTree(ctx, "the base")
	if err != nil {
		return Result{}, err
	}
	var bodies [][]byte
	for _, c := range o.Changes {
		if len(c.Patch) == 0 {
			continue
		}
		tree, err := b.apply(ctx, c)
		if err != nil {
			return Result{}, err
		}
		if tree == last {
			res.Unchanged = append(res.Unchanged, c.Label)
			continue
		}
		last = tree
		body, err := commitObject(tree, res.Head, c, b.when.Unix())
		if err != nil {
			return Result{}, err
		}
		commit := objectID(b.format, "commit", body)
		bodies, res.Head, res.Commits = append(bodies, body), commit, append(res.Commits, commit)
	}
	if err := b.writeCommits(ctx, bodies, res.Commits); err != nil {
		return Result{}, err
	}
	// Create-only: the zero old value makes git refuse if the branch appeared meanwhile.
	zero := strings.Repeat("0", len(res.Head))
	if _, err := b.inRepo(ctx, "update-ref", "-m", "agora: create "+branch, ref, res.Head, zero); err != nil {
		return Result{}, fmt.Errorf("create %s: %w", branch, err)
	}
	return res, nil
}

// Combined applies every change the same way and returns one patch from Base to the result,
// creating no commit and no ref.
func Combined(ctx context.Context, o Options) ([]byte, error) {
	b, err := newBuilder(ctx, o)
	if err != nil {
		return nil, err
	}
	defer b.close()
	merged := false
	for _, c := range o.Changes {
		if len(c.Patch) == 0 {
			continue
		}
		if err := b.merge(ctx, c); err != nil {
			return nil, err
		}
		merged = true
	}
	if !merged {
		return nil, nil
	}
	tree, err := b.writeTree(ctx, "the combined patch")
	if err != nil {
		return nil, err
	}
	return b.git(ctx, nil, "diff-tree", "-r", "-p", "--binary", "--full-index", "--no-ext-diff", "--no-textconv",
		"--no-color", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", o.Base, tree)
}

// builder holds a private git directory and index in a temporary directory.
type builder struct {
	repo, tmp string
	format    string   // the object format: sha1 or sha256
	env       []string // GIT_DIR, GIT_OBJECT_DIRECTORY and GIT_INDEX_FILE: the private ones
	when      time.Time
}

// privateAttributes outranks every .gitattributes: no attribute that would transform content
// or pick a driver (merge, filter, diff) is set, so git merges bytes as bytes, with its own
// text merge.
const privateAttributes = "* !text !eol !crlf !ident !filter !diff !merge !working-tree-encoding\n"

func newBuilder(ctx context.Context, o Options) (*builder, error) {
	if !gitexec.IsObjectID(o.Base) {
		return nil, fmt.Errorf("base %q is not a full commit id", o.Base)
	}
	// Where the repository keeps its objects, and their format. Only rev-parse reads the
	// repository's config, and it runs nothing.
	out, err := gitexec.Command(ctx, o.Repo, "rev-parse", "--show-object-format", "--path-format=absolute", "--git-path", "objects").Output()
	if err != nil {
		return nil, fmt.Errorf("%s is not a git repository (its top directory or a bare one)", o.Repo)
	}
	format, objects, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if (format != "sha1" && format != "sha256") || !filepath.IsAbs(objects) {
		return nil, fmt.Errorf("git rev-parse in %s printed %q: want an object format and the objects directory", o.Repo, cut(string(out)))
	}
	shared, _ := gitexec.Command(ctx, o.Repo, "config", "--get", "core.sharedRepository").Output()
	tmp, err := os.MkdirTemp("", "agora-branch-*")
	if err != nil {
		return nil, err
	}
	if o.When.IsZero() {
		o.When = time.Now()
	}
	gitDir := filepath.Join(tmp, "git")
	b := &builder{repo: o.Repo, tmp: tmp, format: format, when: o.When, env: []string{
		"GIT_DIR=" + gitDir, "GIT_OBJECT_DIRECTORY=" + objects, "GIT_INDEX_FILE=" + filepath.Join(tmp, "index"),
	}}
	if err := writeGitDir(gitDir, format, strings.TrimSpace(string(shared))); err != nil {
		b.close()
		return nil, err
	}
	base, err := gitexec.ResolveCommit(o.Base, func(args ...string) ([]byte, error) { return b.git(ctx, nil, args...) })
	if err != nil || base != o.Base {
		b.close()
		return nil, fmt.Errorf("commit %s is not in %s (is it the repository the work was done on?)", o.Base, o.Repo)
	}
	if _, err := b.git(ctx, nil, "read-tree", o.Base); err != nil {
		b.close()
		return nil, fmt.Errorf("read commit %s: %w", o.Base, err)
	}
	return b, nil
}

// writeGitDir lays out the private git directory: bare, no hooks, our config and attributes.
// shared is the repository's core.sharedRepository, kept so the objects written into its
// store get the permissions its other objects have.
func writeGitDir(dir, format, shared string) error {
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tlogallrefupdates = false\n"
	if format == "sha256" {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n\tlogallrefupdates = false\n[extensions]\n\tobjectformat = sha256\n"
	}
	if shared != "" && len(shared) <= 16 && strings.Trim(shared, "abcdefghijklmnopqrstuvwxyz0123456789") == "" {
		config += "[core]\n\tsharedRepository = " + shared + "\n"
	}
	for _, d := range []string{"objects", "refs", "info"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	for name, content := range map[string]string{"HEAD": "ref: refs/heads/agora\n", "config": config, "info/attributes": privateAttributes} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) close() { os.RemoveAll(b.tmp) }

// apply applies c's patch to the private index and returns the tree it makes.
func (b *builder) apply(ctx context.Context, c Change) (string, error) {
	if err := b.merge(ctx, c); err != nil {
		return "", err
	}
	return b.writeTree(ctx, c.Label)
}

// merge applies c's patch to the private index, three-way where it does not apply as is.
// git's --3way alone (git 2.32 on) merges first: it applies the hunks to the preimage blob
// the patch's index line names and merges that onto the index, so a patch naming another
// blob than the base's (an older version of the file, kept in the history) would edit other
// lines than the same patch applied as is, which is the tree its verify gate ran. A failed
// plain apply leaves the index as it was.
func (b *builder) merge(ctx context.Context, c Change) error {
	_, err := b.git(ctx, c.Patch, "apply", "--cached", "--whitespace=nowarn", "-")
	if err == nil {
		return nil
	}
	if !errors.As(err, new(*gitError)) {
		return err
	}
	if _, err := b.git(ctx, c.Patch, "apply", "--cached", "--3way", "--whitespace=nowarn", "-"); err != nil {
		ce := &ConflictError{Label: c.Label}
		var ge *gitError
		if errors.As(err, &ge) {
			ce.Git = ge.stderr
		}
		if out, lerr := b.git(ctx, nil, "ls-files", "-u", "-z"); lerr == nil {
			ce.Files = unmerged(out)
		}
		return ce
	}
	return nil
}

// writeTree writes the private index as a tree.
func (b *builder) writeTree(ctx context.Context, label string) (string, error) {
	out, err := b.git(ctx, nil, "write-tree")
	if err != nil {
		return "", fmt.Errorf("%s: write the tree: %w", label, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// unmerged lists the paths of `git ls-files -u -z` output, once each, sorted.
func unmerged(out []byte) []string {
	set := map[string]bool{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		if _, path, ok := bytes.Cut(rec, []byte{'\t'}); ok {
			set[string(path)] = true
		}
	}
	files := make([]string, 0, len(set))
	for f := range set {
		files = append(files, f)
	}
	sort.Strings(files)
	return files
}

// gitError is a git command that failed, with its stderr (bounded).
type gitError struct {
	args   string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	if e.stderr == "" {
		return fmt.Sprintf("git %s: %v", e.args, e.err)
	}
	return fmt.Sprintf("git %s: %s", e.args, e.stderr)
}

// git runs git in the private git directory with the private index, stdin from in.
func (b *builder) git(ctx context.Context, in []byte, args ...string) ([]byte, error) {
	cmd := gitexec.Command(ctx, b.tmp, args...)
	cmd.Env = append(cmd.Env, b.env...)
	return run(cmd, in, args[0])
}

// inRepo runs git in the repository itself: its git directory, its refs.
func (b *builder) inRepo(ctx context.Context, args ...string) ([]byte, error) {
	return run(gitexec.Command(ctx, b.repo, args...), nil, args[0])
}

func run(cmd *exec.Cmd, in []byte, name string) ([]byte, error) {
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2048 {
			msg = msg[:2048] + "..."
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, fmt.Errorf("run git: %w", err)
		}
		return nil, &gitError{args: name, stderr: msg, err: err}
	}
	return out, nil
}

func cut(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
