package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/toolreg"
)

// A learn dispatch's write outside the workspace (docs/learn.md, "Files written outside the
// workspace"): write_file judges the path as always; where it would refuse it for leaving the
// workspace (an absolute path, "..", a symbolic link leading out), a learn dispatch's tool
// records it first ([LearnWrites.Record], a file.would_deny) and then makes the write in a
// scratch directory inside the sandbox, never at the path asked for. A write into .git stays
// refused, as does any other refusal.

// maxLearnPath is the longest path a file.would_deny carries (the gateway's limit); a longer
// one stays refused: a path cut on record would name another file.
const maxLearnPath = 1024

// LearnWrites makes write_file learn writes outside the workspace. Only a learn dispatch's
// worker sets it (the host's decision, in the manifest).
type LearnWrites struct {
	// Scratch is a directory inside the sandbox and outside the workspace, made by
	// [NewScratch] before the agent runs; the writes go there.
	Scratch *Scratch
	// Record puts the write on record (path as the sandbox names it: absolute, or relative
	// to the workspace; op; reason) before it is made. The write is made only when it
	// returns nil; its error is what the model reads.
	Record func(ctx context.Context, path, op, reason string) error
}

// Scratch is where a learn dispatch's writes outside the workspace go.
type Scratch struct {
	dir  string   // as made
	real string   // dir with its links resolved when made: a file written must be under it
	root *os.Root // dir opened when made: the writes go there, wherever its name now leads
}

// NewScratch makes a new directory (mode 0700, a random name: nothing in the sandbox could
// have prepared it) under parent, which must not be inside workspace.
func NewScratch(parent, workspace string) (*Scratch, error) {
	dir, err := os.MkdirTemp(parent, "agora-learn-writes-*")
	if err != nil {
		return nil, errors.New("learn scratch: cannot be made")
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		os.Remove(dir)
		return nil, errors.New("learn scratch: cannot be resolved")
	}
	if ws, err := filepath.EvalSymlinks(workspace); err != nil || inside(ws, real) {
		os.Remove(dir)
		return nil, errors.New("learn scratch: must be outside the workspace")
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		os.Remove(dir)
		return nil, errors.New("learn scratch: cannot be opened")
	}
	return &Scratch{dir: dir, real: real, root: root}, nil
}

// Close closes the directory held open.
func (s *Scratch) Close() error { return s.root.Close() }

// Dir is the scratch directory's path.
func (s *Scratch) Dir() string { return s.dir }

// inside reports whether p is root or under it.
func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && filepath.IsLocal(rel)
}

// learnWrite records the write of content to p, which write_file refused with denied, and
// makes it in the scratch directory. It returns denied when the write cannot be learned.
func (w workspace) learnWrite(ctx context.Context, l *LearnWrites, p, content string, denied *toolreg.DeniedError) (toolreg.Result, error) {
	const tool = "write_file"
	asked, name, ok := w.learnPaths(p)
	if !ok {
		return toolreg.Result{}, denied
	}
	if err := l.Record(ctx, asked, "write", denied.Reason+"; "+denied.Hint); err != nil {
		return toolreg.Result{}, err
	}
	// The scratch is a workspace of its own whose files must stay under the directory as it
	// was made: the agent (same uid) may since have replaced it with a link, to the
	// workspace say.
	res, err := workspace{dir: l.Scratch.dir, pinned: l.Scratch.real, held: l.Scratch.root}.write(name, content)
	if err != nil {
		return toolreg.Result{}, err
	}
	return toolreg.Result{Content: "learn: " + asked + " is outside the workspace; recorded (file.would_deny) and " +
		res.Content + " in " + l.Scratch.dir + " instead"}, nil
}

// learnPaths returns p as the record names it (cleaned: absolute, or relative to the
// workspace) and the name of its copy in the scratch directory (the absolute path in the
// sandbox, without its leading "/"); ok is false for a path that cannot be recorded.
func (w workspace) learnPaths(p string) (asked, name string, ok bool) {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return "", "", false
	}
	asked = filepath.Clean(p)
	if len(asked) > maxLearnPath || !utf8.ValidString(asked) || strings.IndexFunc(asked, unicode.IsControl) >= 0 {
		return "", "", false
	}
	abs := asked
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(w.dir, asked)
	} else if w.namesInside(abs) {
		// A workspace file named by its absolute path is refused as in any dispatch (give
		// it relative), not put on record as a write outside the workspace nor diverted to
		// the scratch directory.
		return "", "", false
	}
	name = strings.TrimPrefix(filepath.Clean(abs), "/")
	if name == "" || !filepath.IsLocal(name) {
		return "", "", false
	}
	return asked, name, true
}

// namesInside reports whether the absolute path abs names the workspace or a place under it,
// by the workspace's name or its resolved one (links on abs itself are not followed: a link
// leading out is reached by its relative path, which is learned).
func (w workspace) namesInside(abs string) bool {
	if inside(filepath.Clean(w.dir), abs) {
		return true
	}
	real, err := filepath.EvalSymlinks(w.dir)
	return err != nil || inside(real, abs)
}

// WriteFile writes content to the scratch copy of path (absolute, as the sandbox names it)
// and returns where it went: for a runtime whose own tool was refused the write (claude's
// Write), which the worker makes here instead.
func (s *Scratch) WriteFile(path, content string) (string, error) {
	const tool = "write_file"
	if !filepath.IsAbs(path) || strings.IndexByte(path, 0) >= 0 {
		return "", errors.New(tool + ": learn scratch: want an absolute path")
	}
	name := strings.TrimPrefix(filepath.Clean(path), "/")
	if name == "" || !filepath.IsLocal(name) {
		return "", errors.New(tool + ": learn scratch: the path names no file")
	}
	if _, err := (workspace{dir: s.dir, pinned: s.real, held: s.root}).write(name, content); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, name), nil
}

// hardLinked reports whether f has more than one name (or cannot be told).
func hardLinked(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Nlink > 1
}
