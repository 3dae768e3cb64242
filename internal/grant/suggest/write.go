package suggest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/catalog"
)

// ErrExists is returned by [WriteDir] when the directory is already there and replace was
// not asked for.
var ErrExists = errors.New("already exists")

// WriteDir writes yaml as DIR/capability.yaml, a directory `agora capability register --from`
// takes as it is. The directory is created fresh; with replace, an existing directory (never a
// symlink) that holds nothing but a capability.yaml has that file replaced. The file is
// created exclusively inside the directory opened as an [os.Root], so a link planted at
// its name, or under the directory, is never followed.
func WriteDir(dir string, yaml []byte, replace bool) error {
	// "link/" or "link/." would make every lstat below follow a symlink named link: the
	// checks are made on the name itself.
	dir = filepath.Clean(dir)
	err := os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist) && replace:
		if err := checkReplaceable(dir); err != nil {
			return err
		}
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s %w; pass --force to replace its capability.yaml, or name a new directory", dir, ErrExists)
	default:
		return err
	}
	// The directory as made (or checked), and the one opened, must be one: a directory
	// swapped for a link in between is refused, not written through.
	made, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if opened, err := root.Stat("."); err != nil || !made.IsDir() || !os.SameFile(made, opened) {
		return fmt.Errorf("%s changed while it was being written (a link put in its place?); nothing was written", dir)
	}
	if replace {
		if err := root.Remove(catalog.CapabilityFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	f, err := root.OpenFile(catalog.CapabilityFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(dir, catalog.CapabilityFile), err)
	}
	if _, err := f.Write(yaml); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkReplaceable refuses a dir that is a symlink or holds anything but capability.yaml as
// a regular file: registering it would take those files too.
func checkReplaceable(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory (a symlink is never followed); name a new directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() != catalog.CapabilityFile || !e.Type().IsRegular() {
			return fmt.Errorf("%s holds %q besides capability.yaml; registering it would take that too: name a new directory", dir, e.Name())
		}
	}
	return nil
}
