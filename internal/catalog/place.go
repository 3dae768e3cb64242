package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Place writes the archive entry f at its path beneath root: the worker overlays files into
// the workspace with it, the host lays a capability's files out to mount them.
//
// root may hold symlinks (a hostile checkout can plant workspace/evil -> /etc). The
// [os.Root] refuses any path that leaves it, and every directory on the way is checked with
// Lstat first: a symlink there is refused even when it points inside, so a file lands
// exactly at its own path or not at all. The last component is unlinked before it is
// created with O_EXCL, so an existing symlink there is replaced, never written through.
// Directories made on the way get dirMode; a regular file gets its archive mode masked by
// fileMask (0o777 keeps it).
func Place(root *os.Root, f File, dirMode, fileMask fs.FileMode) error {
	// ReadArchive checked the path already; placing does not depend on it.
	if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == ".." || strings.HasPrefix(f.Path, "../") {
		return fmt.Errorf("invalid path %q", f.Path)
	}
	parts := strings.Split(f.Path, "/")
	for i := 1; i < len(parts); i++ {
		dir := path.Join(parts[:i]...)
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(dir, dirMode); err != nil {
				return fmt.Errorf("create directory %s: %w", dir, err)
			}
		case err != nil:
			return fmt.Errorf("%s: %w", dir, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s: refusing to write %s through a symlink", dir, f.Path)
		case !fi.IsDir():
			return fmt.Errorf("%s: is a file, the capability needs a directory there for %s", dir, f.Path)
		}
	}
	fi, err := root.Lstat(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%s: %w", f.Path, err)
	case fi.IsDir():
		return fmt.Errorf("%s: is a directory, the capability has a file there", f.Path)
	default:
		if err := root.Remove(f.Path); err != nil {
			return fmt.Errorf("replace %s: %w", f.Path, err)
		}
	}
	if f.LinkTarget != "" {
		if err := root.Symlink(f.LinkTarget, f.Path); err != nil {
			return fmt.Errorf("create symlink %s: %w", f.Path, err)
		}
		return nil
	}
	mode := fs.FileMode(f.Mode) & fileMask
	w, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o200)
	if err != nil {
		return fmt.Errorf("create %s: %w", f.Path, err)
	}
	_, werr := w.Write(f.Data)
	cerr := w.Chmod(mode) // the umask does not decide
	if err := errors.Join(werr, cerr, w.Close()); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return nil
}
