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
// declares, which the worker lists as regular files. So is what the worker may not open (an
// agent's chmod 000 of a file or directory it wrote in out/outputs): the worker could not
// hash it either, and says so in result.json, which must still reach the host (#26 red team
// B: the whole upload failed on it, and was retried as a gateway outage).
func Pack(w io.Writer, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name != "." && d != nil && d.IsDir() && denied(err) {
				return fs.SkipDir // listed already, read as empty
			}
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
	if denied(err) {
		return nil
	}
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

// denied reports a permission refusal (EACCES, EPERM).
func denied(err error) bool { return errors.Is(err, fs.ErrPermission) }
