package builtin

import (
	"bytes"
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

// ReasonOutsideWorkspace is the audit reason of a path refused for leaving the workspace.
const ReasonOutsideWorkspace = "path outside the workspace"

// ReasonGitDir is the audit reason of a write refused for landing in a .git directory.
const ReasonGitDir = "path inside a .git directory"

// gitDirDenied is the refusal of a write into a .git directory (see [grant.InGitDir]).
func gitDirDenied(tool string) error {
	return &toolreg.DeniedError{Tool: tool, Reason: ReasonGitDir,
		Hint: "files under .git are git's own configuration, which names programs git runs; they are not written by file tools"}
}

// checkOpened refuses a file f, opened for writing, that is not inside the workspace outside
// any .git directory, judged by where the kernel says f is (/proc/self/fd), whatever links
// the name went through. A file it cannot place is refused. It returns that place.
func (w workspace) checkOpened(tool string, f *os.File) (string, error) {
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonGitDir, Hint: "where the file is cannot be checked (no /proc)"}
	}
	root := w.pinned
	if root == "" {
		if root, err = filepath.EvalSymlinks(w.dir); err != nil {
			return real, errors.New(tool + ": the workspace cannot be opened")
		}
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || !filepath.IsLocal(rel) {
		return real, &toolreg.DeniedError{Tool: tool, Reason: ReasonOutsideWorkspace, Hint: "the file is outside the workspace"}
	}
	if grant.InGitDir(rel) {
		return real, gitDirDenied(tool)
	}
	return real, nil
}

// maxPathLen caps a path argument, in characters.
const maxPathLen = 4096

// binarySniffLen is how much of a file is searched for a NUL byte to call it binary.
const binarySniffLen = 8000

// workspace confines the file tools to dir.
type workspace struct {
	dir string
	// pinned, when set, is where a file written must be, fixed when the directory was made
	// (a learn dispatch's scratch, learnwrite.go), instead of dir resolved at each write.
	pinned string
	// held, when set, is the directory opened when it was made: every write goes through it,
	// wherever its name now leads.
	held *os.Root
}

// open opens the workspace as an [os.Root]. A Root resolves every path relative to the
// workspace and follows a symbolic link only while it stays inside, so a link to /etc or to
// ../outside fails at any component of any later operation.
func (w workspace) open(tool string) (*os.Root, error) {
	if w.held != nil {
		r, err := w.held.OpenRoot(".")
		if err != nil {
			return nil, errors.New(tool + ": the directory cannot be opened")
		}
		return r, nil
	}
	r, err := os.OpenRoot(w.dir)
	if err != nil {
		return nil, errors.New(tool + ": the workspace cannot be opened")
	}
	return r, nil
}

// resolve checks p (see clean) and opens the workspace root it is relative to. The caller
// closes the root.
func (w workspace) resolve(tool, p string) (*os.Root, string, error) {
	name, err := clean(tool, p)
	if err != nil {
		return nil, "", err
	}
	root, err := w.open(tool)
	if err != nil {
		return nil, "", err
	}
	return root, name, nil
}

// stat resolves p ("" meaning the workspace root) and stats it, for the tools that take a
// file or a directory. The caller closes root.
func (w workspace) stat(tool, p string) (*os.Root, string, fs.FileInfo, error) {
	p = cmp.Or(p, ".")
	root, name, err := w.resolve(tool, p)
	if err != nil {
		return nil, "", nil, err
	}
	fi, err := root.Stat(name)
	if err != nil {
		root.Close()
		return nil, "", nil, fsError(tool, err)
	}
	return root, name, fi, nil
}

// clean checks p lexically and returns it cleaned: relative, without NUL bytes, not climbing
// out with "..". Symbolic links are the Root's business.
func clean(tool, p string) (string, error) {
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonOutsideWorkspace, Hint: "the path contains a NUL byte"}
	case filepath.IsAbs(p):
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonOutsideWorkspace,
			Hint: "absolute paths are refused; give a path relative to the workspace root"}
	}
	c := filepath.Clean(p)
	if !filepath.IsLocal(c) {
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonOutsideWorkspace,
			Hint: "the path climbs out of the workspace with \"..\"; give a path inside it"}
	}
	return c, nil
}

// fsError turns an error from a Root operation into one for the model and the audit record:
// a symbolic link leading out is a refusal; anything else keeps only its cause, since a
// *fs.PathError repeats the path.
func fsError(tool string, err error) error {
	if escapes(err) {
		return &toolreg.DeniedError{Tool: tool, Reason: ReasonOutsideWorkspace,
			Hint: "a symbolic link on the path points outside the workspace"}
	}
	var msg string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		msg = "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		msg = "permission denied"
	case errors.Is(err, syscall.ENOTDIR):
		msg = "a component of the path is not a directory"
	case errors.Is(err, syscall.EISDIR):
		msg = "is a directory"
	case errors.Is(err, syscall.ELOOP):
		msg = "too many levels of symbolic links"
	case errors.Is(err, syscall.ENAMETOOLONG):
		msg = "file name too long"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		msg = err.Error()
	}
	return errors.New(tool + ": " + msg)
}

// escapes reports whether err is an [os.Root] refusing a path that leads out of it. The
// os package does not export that error, so it is recognised by its text; a test pins it.
func escapes(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// isBinary reports whether b looks like binary data (a NUL byte near the start).
func isBinary(b []byte) bool {
	b = b[:min(len(b), binarySniffLen)]
	return bytes.IndexByte(b, 0) >= 0
}
