package execrt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotFound means a program name was not found in any directory of the PATH.
var ErrNotFound = errors.New("executable not found in PATH")

// LookPath resolves name the way execvp does, but with the given PATH value instead of the
// caller's environment: a name containing a slash is used as is; otherwise each absolute
// directory of pathList is tried in order and the first executable regular file wins.
// Relative and empty PATH entries are skipped, so a PATH cannot make the current directory
// (the workspace, which the agent controls) a source of programs.
func LookPath(name, pathList string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (PATH=%s)", ErrNotFound, pathList)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	}
	return nil
}
