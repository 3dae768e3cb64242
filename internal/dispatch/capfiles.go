package dispatch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// stageCapabilityFiles lays each pinned capability's files out at dir/NAME, from the
// catalog's content (the digests the record pins), never from anything a sandbox wrote. The
// sandbox sees dir read-only at /agora/capabilities; the files are not copied into the
// workspace, so none of them can replace a file of the repository. Modes are private, as
// everywhere in AGORA_HOME: handOver gives the tree to the sandbox user.
//
// Nothing in the layout keeps a write bit: files are masked to 0500 and every directory,
// dir included, ends 0500. Under a sandbox that is belt and braces (the bind is read-only);
// under `sandbox: none`, where dir is the worker's own AGORA_CAPABILITIES on the host, the
// modes are all there is: they stop a non-root agent that does not chmod them back, and
// root not at all (docs/exec.md says so). Either way each dispatch lays the files out
// afresh from the catalog and removeWork deletes them, so what one agent changes no other
// dispatch sees.
//
// made says dir is a warm slot's stage's: made empty at fill, and bound into the slot's
// sandbox then; it must still be an empty directory.
func (d *Dispatcher) stageCapabilityFiles(p *pinned, dir string, made bool) error {
	if made {
		if err := emptyDir(dir); err != nil {
			return err
		}
	} else if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, v := range p.capabilities {
		data, err := d.Catalog.Content(v)
		if err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		files, err := catalog.ReadStored(data)
		if err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		capDir := filepath.Join(dir, v.Name)
		if err := os.Mkdir(capDir, 0o700); err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		root, err := os.OpenRoot(capDir)
		if err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		for _, f := range files {
			if f.Path == catalog.CapabilityFile {
				continue
			}
			if err := catalog.Place(root, f, 0o700, 0o500); err != nil {
				root.Close()
				return fmt.Errorf("capability %q: %w", v.Name, err)
			}
		}
		root.Close()
	}
	return setTreeDirModes(dir, 0o500)
}

// setTreeDirModes sets the mode of dir and of every directory below it. It opens each
// directory relative to its parent without following a symlink, so a tree someone swapped
// parts of (an agent under `sandbox: none` owns its layout) never leads it elsewhere; a
// symlink is left alone.
func setTreeDirModes(dir string, mode fs.FileMode) error {
	return setDirModes(unix.AT_FDCWD, dir, uint32(mode.Perm()))
}

func setDirModes(parent int, name string, mode uint32) error {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT):
		return nil // a file, a symlink, or gone
	case err != nil:
		return fmt.Errorf("open %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	// Owner rwx while the entries are read: a 0500 directory stays listable either way.
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", name, err)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	for _, n := range names {
		if err := setDirModes(fd, n, mode); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", name, err)
	}
	return nil
}

// capabilityFilesDir is the stage's layout of the capabilities' files.
func (s *stage) capabilityFilesDir() string {
	if s.capFiles != "" {
		return s.capFiles
	}
	return filepath.Join(s.dir, wire.CapabilityFilesDir)
}

// removeCapabilityFiles deletes the layout, which has no writable directory: made writable
// again first, or a non-root agora could not unlink a file in it.
func (s *stage) removeCapabilityFiles() {
	_ = setTreeDirModes(s.capabilityFilesDir(), 0o700)
	os.RemoveAll(s.capabilityFilesDir())
}

// emptyDir refuses dir unless it is a directory (not a link to one) holding nothing.
func emptyDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	// O_NOFOLLOW|O_DIRECTORY: the name is read as the directory Lstat saw, never through a link.
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}
