// Package roottar writes a tar of a directory tree by an lstat walk beneath an [os.Root],
// never following a symlink, and of one file. It is the one tar writer of host content
// sent to a worker (netgw's download of a Fetch mount) and of a worker's results sent to the
// host (worker/remote's upload); each side says in [Options] what its tar holds.
//
// A leaf (the standard library only): both sides of the sandbox link it.
package roottar

import (
	"archive/tar"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// Options say what a tree's tar holds. The zero value keeps regular files and directories,
// mode 0644/0755, and fails on anything it cannot read.
type Options struct {
	// Symlinks keeps a symlink as an entry of its own, its target as written; without it a
	// symlink is left out. A symlink is never followed either way.
	Symlinks bool
	// SkipDenied leaves out a file the walk may not open, and reads a directory it may not
	// list as empty (its entry is kept); without it either fails the tar.
	SkipDenied bool
	// SkipChanged leaves out a file that is no longer a regular file when opened (swapped
	// since the listing); without it that fails the tar.
	SkipChanged bool
	// FileMode is a regular file's mode in the tar, given its mode on disk; nil is 0755 for a
	// file with an execute bit, else 0644.
	FileMode func(fs.FileMode) int64
	// DirMode is every directory's mode in the tar; 0 is 0755.
	DirMode int64
	// Buffer, when not empty, is what file content is copied through.
	Buffer []byte
}

// WriteDir writes the tree beneath dir to w as a tar, then the tar's end. Sockets, FIFOs and
// devices are never content: they are left out.
func WriteDir(w io.Writer, dir string, o Options) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if o.SkipDenied && name != "." && d != nil && d.IsDir() && denied(err) {
				return fs.SkipDir // listed already, read as empty
			}
			return err
		}
		if name == "." {
			return nil
		}
		return o.entry(tw, root, name, d)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func (o Options) entry(tw *tar.Writer, root *os.Root, name string, d fs.DirEntry) error {
	switch d.Type() {
	case fs.ModeDir:
		mode := cmp.Or(o.DirMode, 0o755)
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Format: tar.FormatPAX})
	case fs.ModeSymlink:
		if !o.Symlinks {
			return nil
		}
		target, err := root.Readlink(name)
		if err != nil {
			return err
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, Format: tar.FormatPAX})
	case 0:
		return o.file(tw, root, name)
	}
	return nil
}

func (o Options) file(tw *tar.Writer, root *os.Root, name string) error {
	// O_NOFOLLOW: an entry swapped for a symlink since the listing is refused, not followed
	// (os.Root would follow it within the tree); O_NONBLOCK: one swapped for a FIFO does not
	// hang the open.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if o.SkipDenied && denied(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var notRegular error // swapped since the listing: not a regular file any more
	if !o.SkipChanged {
		notRegular = fmt.Errorf("%s changed while read", name)
	}
	return writeRegular(tw, name, f, o, notRegular)
}

// writeRegular writes f as the regular file name and closes it; a file that is not a regular
// file writes nothing and returns notRegular.
func writeRegular(tw *tar.Writer, name string, f *os.File, o Options, notRegular error) error {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return notRegular
	}
	return writeFile(tw, name, f, fi, o)
}

// ErrNotRegular is what [WriteSingle] returns for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// WriteSingle writes the regular file at path to w as a tar of the one entry name, then the
// tar's end. The path is the caller's own choice (a symlink there is followed); anything
// but a regular file is refused with [ErrNotRegular], and a FIFO does not hang the open.
func WriteSingle(w io.Writer, name, path string, o Options) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := writeRegular(tw, name, f, o, ErrNotRegular); err != nil {
		return err
	}
	return tw.Close()
}

// writeFile writes f, whose stat is fi, as the regular file name, with o's mode and buffer.
// A file that shrinks while read fails the tar (the header promised its size).
func writeFile(tw *tar.Writer, name string, f *os.File, fi fs.FileInfo, o Options) error {
	mode := fileMode(fi.Mode())
	if o.FileMode != nil {
		mode = o.FileMode(fi.Mode())
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Clean(name), Size: fi.Size(), Mode: mode, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	var n int64
	var err error
	if len(o.Buffer) > 0 {
		n, err = io.CopyBuffer(tw, io.LimitReader(f, fi.Size()), o.Buffer)
	} else {
		n, err = io.Copy(tw, io.LimitReader(f, fi.Size()))
	}
	if err != nil {
		return err
	}
	if n != fi.Size() {
		return errors.New(name + " shrank while read")
	}
	return nil
}

// fileMode is 0755 for a file with an execute bit, else 0644.
func fileMode(m fs.FileMode) int64 {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// denied reports a permission refusal (EACCES, EPERM).
func denied(err error) bool { return errors.Is(err, fs.ErrPermission) }
