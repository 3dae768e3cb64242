// Package workerbin finds, checks and pins the worker binary (cmd/agora-worker) that the host
// binds read-only into every sandbox, and that Claude Code runs for every hook event.
//
// Where: [Locate] looks beside the agora executable ([Name] next to it: `make install` and
// `go install ./cmd/agora ./cmd/agora-full ./cmd/agora-worker` both put it there), unless the person running
// agora names another file (AGORA_WORKER_BINARY, or worker.binary in agora.yaml). Nothing a run, a plan or an MCP client sends can move it.
//
// What: [Pinner.Pin] reads the installed file once, checks that it is an agora-worker built
// from the same source as this agora (its embedded build information), hashes the bytes it
// read and writes exactly those bytes to a content-addressed copy in a directory only agora
// writes (AGORA_HOME/bin/agora-worker-<sha256>, mode 0555). The copy is what is bound, so
// what the dispatch record's digest names is what the sandbox runs: there is no window
// between hashing a path and binding it. The pin is cached by the identity of both files
// (device, inode, size, mtime, ctime), so a dispatch costs two stat calls, not a 13 MB hash.
//
// A missing worker, one built from other source, or one whose pinned copy changed fails the
// dispatch with the command that fixes it; agora never falls back to binding itself.
//
// The exec-only worker ([ExecName], beside the worker) is the same program built with the
// agora_worker_exec tag; the dispatcher pins it the same way for the dispatches it serves.
package workerbin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Name is the worker program's file name, beside agora.
const Name = "agora-worker"

// ExecName is the exec-only worker's file name, beside [Name]: cmd/agora-worker built with
// the agora_worker_exec tag, which runs exec dispatches only and links no model runtime and
// no HTTP client, so it starts sooner. It is optional: without it every dispatch binds
// [Name] (docs/adr/0035-an-exec-dispatch-runs-an-exec-only-worker.md).
const ExecName = "agora-worker-exec"

// ExecBeside is where the exec-only worker is looked for: beside the worker at worker.
func ExecBeside(worker string) string { return filepath.Join(filepath.Dir(worker), ExecName) }

// ExecThere reports whether anything is at path, the exec-only worker's name: only a name with
// nothing at it (ENOENT) is passed over. A link to nothing counts, and so does a name that
// cannot be looked at (EACCES, ENOTDIR): the checks that follow then fail and say why, where
// passing over would quietly run the other worker. The dispatcher and agora doctor decide
// alike through it.
func ExecThere(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// MainPath is the package path the worker's build information must name.
const MainPath = "github.com/agora-dev/agora/cmd/agora-worker"

// FixCommand is what a person runs to install agora and its worker side by side.
const FixCommand = "make install (from a checkout), or go install ./cmd/agora ./cmd/agora-full ./cmd/agora-worker"

// Binary is a pinned worker binary, ready to bind.
type Binary struct {
	// Source is the installed file it was read from (symlinks followed).
	Source string `json:"source"`
	// Path is the pinned copy the host binds: Dir/agora-worker-<sha256>.
	Path string `json:"path"`
	// SHA256 is the lowercase hex sha256 of the pinned copy's bytes.
	SHA256 string `json:"sha256"`
	// Version is the agora version and VCS revision it was built from, as its build
	// information says ("(devel)" and no revision for a build without them).
	Version string `json:"version"`
}

// Locate returns the worker binary's path: configured (agora.yaml worker.binary) when set,
// else [Name] beside exe (the running agora's executable, symlinks followed, so a link to
// agora on the PATH finds the worker beside the real file). It does not check that the file
// exists; [Pinner.Pin] does, with the fix.
func Locate(exe, configured string) (string, error) {
	if configured != "" {
		if !filepath.IsAbs(configured) {
			return "", fmt.Errorf("worker.binary %q: want an absolute path", configured)
		}
		return configured, nil
	}
	if exe == "" {
		return "", errors.New("find the worker binary: the agora executable's path is unknown")
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("find the worker binary beside %s: %w", exe, err)
	}
	return filepath.Join(filepath.Dir(real), Name), nil
}

// MissingError means there is no usable worker binary where agora looked.
type MissingError struct {
	Path       string
	Configured bool // AGORA_WORKER_BINARY or agora.yaml's worker.binary named Path
	Err        error
}

func (e *MissingError) Error() string {
	if e.Configured {
		return fmt.Sprintf("worker binary %s (AGORA_WORKER_BINARY or agora.yaml worker.binary): %v; fix the setting or install it with %s", e.Path, e.Err, FixCommand)
	}
	return fmt.Sprintf("worker binary %s: %v; agora runs dispatches with the agora-worker installed beside it: install both with %s", e.Path, e.Err, FixCommand)
}

func (e *MissingError) Unwrap() error { return e.Err }

// MismatchError means the worker binary was not built from the same source as this agora.
type MismatchError struct {
	Path      string
	Got, Want string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("worker binary %s is %s, but this agora is %s: reinstall both from one source with %s", e.Path, e.Got, e.Want, FixCommand)
}

// checkFile refuses a source that is not a regular executable file only its owner writes, in
// a directory only its owner may replace it in (the sticky bit counts as that).
func checkFile(path string, st os.FileInfo, configured bool) error {
	if dir, mode, ok := openDir(path); ok {
		// Anyone who can write the directory can put another file at path.
		return fmt.Errorf("worker binary %s is in a directory writable by its group or others (%s, mode %v); fix it with chmod go-w %s", path, dir, mode, dir)
	}
	missing := func(err error) error { return &MissingError{Path: path, Configured: configured, Err: err} }
	switch {
	case !st.Mode().IsRegular():
		return missing(errors.New("not a regular file"))
	case st.Mode()&0o111 == 0:
		return missing(errors.New("not executable"))
	case st.Mode()&0o022 != 0:
		// Anyone who can rewrite it would decide what every sandbox runs.
		return fmt.Errorf("worker binary %s is writable by its group or others (mode %v); fix it with chmod go-w %s", path, st.Mode().Perm(), path)
	}
	return nil
}

// openDir returns a directory that anyone but its owner may write (and that has no sticky
// bit) among the ancestors of path and of the file path's symlinks lead to: whoever can write
// any of them can put another file where agora reads the worker, by replacing the file, a
// directory on the way, or the link's target (a link beside agora into an open
// directory passed when only path's own directory was checked).
func openDir(path string) (string, os.FileMode, bool) {
	paths := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err == nil && st.Mode()&0o022 != 0 && st.Mode()&os.ModeSticky == 0 {
				return d, st.Mode().Perm(), true
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return "", 0, false
}
