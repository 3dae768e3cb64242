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
	"time"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch/gitparse"
	"github.com/agora-dev/agora/internal/gitexec"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A stacked dispatch (its Stack inputs: docs/plan.md, "Stacked tasks") starts from upstream
// work: its revision with each stack patch applied in order, as one commit each. The host
// builds that base with git's own machinery three times, always the same way:
//
//  1. at accept, in a scratch repository that reads the source's objects (never writes
//     them): a patch that does not apply ends the dispatch failed/stack-conflict there, in
//     the accepted entry's wake, before anything is staged or run; one that applies gives
//     the commit recorded as the record's StackBase (in the accepted entry);
//  2. at staging, in the workspace's own fetched repository, which is then checked out at
//     that commit: the agent's baseline, so its patch holds its own changes only;
//  3. for the verify gate, in the gate's fetched repository: the gate's base.
//
// Each build must give StackBase again, or the dispatch fails integrity-failed. The commits
// are laid out by hand (as gitbranch lays out a branch's): author and committer agora, dated
// the revision's own committer time, the message naming the upstream task and dispatch; so
// the same revision and patches give the same commit ids in every repository. A dispatch
// without a repository stacks on the empty tree and its base is a tree, checked out as files.
// Every git step runs through gitexec (no hooks, no user or system configuration) with the
// gate's attributes line in info/attributes, so nothing a patch or the tree sets transforms
// content or picks a driver. Each patch applies as it is, and three-way (--3way) only where
// it does not, as `orch patches --branch` merges them: two bases that touch the same lines
// differently conflict, anything else merges ([applyStackPatch]).

// maxStack caps the patches of one dispatch's stack.
const maxStack = 256

// Names in the stage directory of a stack being built.
const (
	stackGitDir = "stack.git" // the private git directory of a stack without a repository
	stackIndex  = "stack.idx" // the index a workspace's stack is built in
)

// stackPatch is one patch of a dispatch's stack, in the order it applies.
type stackPatch struct {
	task, dispatch string // the upstream task (the input's Dir) and its dispatch
	patch          []byte
	// load, when set, reads the patch (checked against its digest) as it is applied, so a
	// build holds one patch at a time: a stack of 256 patches at the size cap is 16 GiB.
	load func() ([]byte, error)
}

// stackReadError is a stack patch the blob store no longer gives back as recorded (gone, or
// not the bytes its digest names): accept refuses the request, staging and the gate fail
// the dispatch integrity-failed.
type stackReadError struct{ err error }

func (e *stackReadError) Error() string { return e.err.Error() }
func (e *stackReadError) Unwrap() error { return e.err }

// StackConflictError is a stack patch that does not apply on the revision and the patches
// before it: the dispatch's failure detail.
type StackConflictError struct {
	Task, Dispatch string
	On             []string // the tasks whose patches were applied before it
	Git            string   // git's words, bounded
}

func (e *StackConflictError) Error() string {
	on := "the run's commit"
	if len(e.On) > 0 {
		on += " with the work of " + strings.Join(e.On, ", ")
	}
	return fmt.Sprintf("the stacked base does not build: task %s's work (dispatch %s) does not apply on %s: %s; the agent did not run",
		e.Task, e.Dispatch, on, orNone(e.Git))
}

func orNone(s string) string {
	if s == "" {
		return "(git said nothing)"
	}
	return s
}

// stackInputs are r's stack inputs, in order.
func stackInputs(inputs []Input) []Input {
	var out []Input
	for _, in := range inputs {
		if in.Stack {
			out = append(out, in)
		}
	}
	return out
}

// stackPatches names the patches of inputs' stack inputs, in order (nil when there are
// none), each read from the blob store and checked against its recorded digest only when
// it is applied; one the store does not hold is refused here.
func (d *Dispatcher) stackPatches(inputs []Input) ([]stackPatch, error) {
	ins := stackInputs(inputs)
	if len(ins) > maxStack {
		return nil, fmt.Errorf("the stack holds %d patches; at most %d", len(ins), maxStack)
	}
	var out []stackPatch
	for _, in := range ins {
		if len(in.Files) != 1 || in.Files[0].Path != PatchFile {
			return nil, fmt.Errorf("stack input %s/%s is not one patch", in.Key, in.Dir)
		}
		f, p := in.Files[0], stackPatch{task: in.Dir, dispatch: in.FromDispatch}
		if f.Size > 0 || f.Digest != digest.Digest(emptyDigest) {
			if !d.Blobs.Has(f.Digest) {
				return nil, fmt.Errorf("stack input %s/%s: %w: %s", in.Key, in.Dir, blob.ErrNotFound, f.Digest)
			}
			key, dir := in.Key, in.Dir
			p.load = func() ([]byte, error) {
				b, err := d.Blobs.Get(f.Digest, wire.MaxPatchSize)
				if err != nil {
					return nil, &stackReadError{fmt.Errorf("stack input %s/%s: %w", key, dir, err)}
				}
				return b, nil
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// gitRunner runs one git step with stdin (nil: none); a step git refused is a *gitError.
type gitRunner func(ctx context.Context, stdin []byte, args ...string) ([]byte, error)

// gitIn is a runner in dir (a work tree or a git directory) with env added to gitexec's and
// pre before the step's arguments.
func gitIn(dir string, env, pre []string) gitRunner {
	return func(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
		all := append([]string{"-c", "core.autocrlf=false", "-c", "core.safecrlf=false", "-c", "core.symlinks=true"}, pre...)
		cmd := gitexec.Command(ctx, dir, append(all, args...)...)
		cmd.Env = append(cmd.Env, env...)
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
}

// applyStack builds the stacked base in the repository git works on, in its index: base's
// tree (the empty tree: none) with each patch applied in order. With commits (a repository),
// each patch that changes the tree becomes a commit on the one before, base first, and the
// last commit is returned (base itself when none changed anything); without, the tree. A
// patch that does not apply is a *StackConflictError.
func applyStack(ctx context.Context, git gitRunner, base string, commits bool, patches []stackPatch) (string, error) {
	var date string
	if commits {
		body, err := git(ctx, nil, "cat-file", "commit", base)
		if err != nil {
			return "", fmt.Errorf("read commit %s: %w", base, err)
		}
		if date, err = gitparse.CommitterDate(body); err != nil {
			return "", fmt.Errorf("commit %s: %w", base, err)
		}
		if _, err := git(ctx, nil, "read-tree", base); err != nil {
			return "", fmt.Errorf("read commit %s: %w", base, err)
		}
	} else if _, err := git(ctx, nil, "read-tree", "--empty"); err != nil {
		return "", err
	}
	tip, tree := base, ""
	if !commits {
		tip, tree = emptyTree, emptyTree
	}
	var on []string
	for _, p := range patches {
		b := p.patch
		if p.load != nil {
			var err error
			if b, err = p.load(); err != nil {
				return "", err
			}
		}
		if len(b) > 0 {
			if err := applyStackPatch(ctx, git, b); err != nil {
				var ge *gitError
				if errors.As(err, &ge) {
					return "", &StackConflictError{Task: p.task, Dispatch: p.dispatch, On: on, Git: ge.msg}
				}
				return "", err
			}
			out, err := git(ctx, nil, "write-tree")
			if err != nil {
				return "", err
			}
			next := strings.TrimSpace(string(out))
			if !isObjectID(next) {
				return "", fmt.Errorf("git write-tree printed %q", cut(next))
			}
			if next != tree {
				tree = next
				if !commits {
					tip = tree
				} else if tip, err = writeStackCommit(ctx, git, tree, tip, date, p); err != nil {
					return "", err
				}
			}
		}
		on = append(on, p.task)
	}
	return tip, nil
}

// applyStackPatch applies one base's patch to the index: as it is, and three-way only where
// it does not apply as is, as `orch patches --branch` does (internal/gitbranch). git's --3way
// alone (git 2.32 on) merges first, from the preimage blob the patch's index line names: a
// patch naming another blob than the tree's (an older version of the file, kept in the
// history) would put its hunks on other lines than the same patch applied as is, which is the
// tree the base's verify gate ran. A failed plain apply leaves the index as it was.
func applyStackPatch(ctx context.Context, git gitRunner, patch []byte) error {
	_, err := git(ctx, patch, "apply", "--cached", "--whitespace=nowarn", "-")
	if err == nil || !errors.As(err, new(*gitError)) {
		return err
	}
	_, err = git(ctx, patch, "apply", "--cached", "--3way", "--whitespace=nowarn", "-")
	return err
}

// writeStackCommit stores the commit of tree on parent for p and returns its id.
func writeStackCommit(ctx context.Context, git gitRunner, tree, parent, date string, p stackPatch) (string, error) {
	if strings.ContainsAny(p.task+p.dispatch, "\n\x00") {
		return "", fmt.Errorf("stack input %q of dispatch %q cannot be named in a commit", p.task, p.dispatch)
	}
	body := "tree " + tree + "\nparent " + parent + "\n" +
		"author agora <agora@agora.invalid> " + date + "\n" +
		"committer agora <agora@agora.invalid> " + date + "\n\n" +
		"agora: stack task " + p.task + "\n\nAgora-Task: " + p.task + "\nAgora-Dispatch: " + p.dispatch + "\n"
	out, err := git(ctx, []byte(body), "hash-object", "-t", "commit", "-w", "--stdin")
	if err != nil {
		return "", fmt.Errorf("write the commit of task %s's work: %w", p.task, err)
	}
	id := strings.TrimSpace(string(out))
	if !isObjectID(id) {
		return "", fmt.Errorf("git hash-object printed %q", cut(id))
	}
	return id, nil
}

func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

func cut(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// stackScratchDir, under the state directory, holds the scratch repositories accept builds
// stacked bases in, one per dispatch id: one a crash left is removed when the same dispatch
// is accepted again (the engine accepts an attempt it never saw recorded again, by its id),
// or by the next stacked accept once it is older than stackScratchMaxAge (a dispatch that is
// never accepted again, such as one of a run cancelled while serve was down).
const stackScratchDir = ".stack"

// stackBuildTimeout bounds accept's build of a stacked base, and stackScratchMaxAge is how
// old a scratch repository must be before another accept removes it: twice the bound, so no
// build in progress is ever swept from under itself.
const (
	stackBuildTimeout  = 30 * time.Minute
	stackScratchMaxAge = 2 * stackBuildTimeout
)

// sweepStackScratch removes what crashed accepts left in dir: entries last changed before
// now less stackScratchMaxAge. Best effort: what it cannot read or remove stays.
func sweepStackScratch(dir string, now time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < stackScratchMaxAge {
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// stackBaseAt builds the stacked base of patches on repo's commit rev (repo "": on the empty
// tree) in a scratch repository at tmp (made here, removed after) that reads repo's objects
// and writes its own: what accept records as StackBase. A conflict is a *StackConflictError.
func stackBaseAt(ctx context.Context, tmp, repo, rev string, patches []stackPatch) (string, error) {
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	gitDir := filepath.Join(tmp, "git")
	format := "sha1"
	env := []string{"GIT_DIR=" + gitDir, "GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	if repo != "" {
		out, err := gitexec.Command(ctx, repo, "rev-parse", "--show-object-format", "--path-format=absolute", "--git-path", "objects").Output()
		if err != nil {
			return "", fmt.Errorf("read the repository's object store: %w", err)
		}
		f, objects, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		if (f != "sha1" && f != "sha256") || !filepath.IsAbs(objects) {
			return "", fmt.Errorf("git rev-parse printed %q: want an object format and the objects directory", cut(string(out)))
		}
		format = f
		env = append(env, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+alternatePath(objects))
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tlogallrefupdates = false\n"
	if format == "sha256" {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n\tlogallrefupdates = false\n[extensions]\n\tobjectformat = sha256\n"
	}
	for _, dir := range []string{"objects", "refs", "info"} {
		if err := os.MkdirAll(filepath.Join(gitDir, dir), 0o700); err != nil {
			return "", err
		}
	}
	for name, content := range map[string]string{"HEAD": "ref: refs/heads/stack\n", "config": config, "info/attributes": gateAttributes} {
		if err := os.WriteFile(filepath.Join(gitDir, name), []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	base := rev
	if repo == "" {
		base = emptyTree
	}
	return applyStack(ctx, gitIn(tmp, env, nil), base, repo != "", patches)
}

// alternatePath is dir as one entry of GIT_ALTERNATE_OBJECT_DIRECTORIES, which separates
// entries with ':': a path holding a ':', a '"' or a control character is written as git
// reads a double-quoted entry (C style, octal for other bytes), so it names that directory
// and no other.
func alternatePath(dir string) string {
	if !strings.ContainsAny(dir, ":\"\\") && strings.IndexFunc(dir, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0 {
		return dir
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(dir); i++ {
		switch c := dir[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// stackWorkspace builds r's stacked base in the stage's workspace, a repository holding
// r.Revision's history (fetchPinned), and checks it out there, HEAD detached at it. The
// stack is built in an index of its own beside the stage. The gate's attributes line sits in
// info/attributes for the build and the checkout, and only then: the checkout writes the
// tree's bytes exactly, as the verify gate's tree holds them, whatever a .gitattributes a
// base's agent wrote says (a text or eol attribute would otherwise convert files the
// downstream agent then takes its patch against).
func stackWorkspace(ctx context.Context, r *Record, s *stage, patches []stackPatch) error {
	attrs := filepath.Join(s.workspace, ".git", "info", "attributes")
	if err := os.MkdirAll(filepath.Dir(attrs), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(attrs, []byte(gateAttributes), 0o600); err != nil {
		return err
	}
	defer os.Remove(attrs)
	idx := filepath.Join(s.dir, stackIndex)
	defer os.Remove(idx)
	tip, err := applyStack(ctx, gitIn(s.workspace, []string{"GIT_INDEX_FILE=" + idx}, nil), r.Revision, true, patches)
	if err != nil {
		return err
	}
	if err := checkStackBase(r, tip); err != nil {
		return err
	}
	if out, err := gitCmd(ctx, s.workspace, "-c", "core.autocrlf=false", "checkout", "--quiet", "--detach", tip).CombinedOutput(); err != nil {
		return s.gitError("check out the stacked base "+tip, out)
	}
	return nil
}

// stackFiles writes r's stacked base, a tree of files, into the stage's empty workspace (a
// dispatch without a repository): built in a private git directory beside the stage, which
// the sandbox never sees, and checked out as git checks out an index.
func stackFiles(ctx context.Context, r *Record, s *stage, patches []stackPatch) error {
	gitDir := filepath.Join(s.dir, stackGitDir)
	defer os.RemoveAll(gitDir)
	if err := newPrivateGitDir(gitDir); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(gitDir, "info", "attributes"), []byte(gateAttributes), 0o600); err != nil {
		return err
	}
	git := gitIn(s.dir, nil, []string{"--git-dir=" + gitDir, "--work-tree=" + s.workspace})
	tree, err := applyStack(ctx, git, emptyTree, false, patches)
	if err != nil {
		return err
	}
	if err := checkStackBase(r, tree); err != nil {
		return err
	}
	_, err = git(ctx, nil, "checkout-index", "--all", "--force")
	return err
}

// stackMismatchError is a stacked base built again that is not the one accept recorded.
type stackMismatchError struct{ got, want string }

func (e *stackMismatchError) Error() string {
	return fmt.Sprintf("the stacked base built again is %s, the dispatch was accepted on %s", orNone(e.got), orNone(e.want))
}

// checkStackBase refuses a stacked base other than the one accept recorded.
func checkStackBase(r *Record, got string) error {
	if got != r.StackBase {
		return &stackMismatchError{got: got, want: r.StackBase}
	}
	return nil
}
