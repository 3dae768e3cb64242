package remote

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Pack writes dir's regular files and directories to w as a tar, walking beneath dir with
// os.Root and never following a symlink. Symlinks, FIFOs, sockets and devices are left out:
// the host takes regular files and directories only, and reads only what result.json
// declares, which the worker lists as regular files.
func Pack(w io.Writer, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		switch d.Type() {
		case fs.ModeDir:
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o700, Format: tar.FormatPAX})
		case 0:
			return packFile(tw, root, name)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func packFile(tw *tar.Writer, root *os.Root, name string) error {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil // swapped since the listing: not a regular file any more
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: 0o600, Format: tar.FormatPAX}); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
	if err != nil {
		return err
	}
	if n != fi.Size() {
		return errors.New(name + " shrank while read")
	}
	return nil
}
