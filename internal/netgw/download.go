package netgw

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sync"
	"syscall"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// download streams a Fetch mount's host content as a tar.
func (s *Server) download(w http.ResponseWriter, r *http.Request, rec *record, m *mountRecord) {
	w.Header().Set("Content-Type", "application/x-tar")
	rc := http.NewResponseController(w)
	dw := &deadlineWriter{w: w, rc: rc}
	if err := writeTar(dw, m); err != nil {
		// The status is sent already: the worker sees a truncated tar (no end marker) and
		// fails; the log says why.
		s.logger().Error("gateway download failed", "dispatch_id", rec.Dispatch, "mount", m.Name, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// copyBufs are the buffers file content is copied through: large, so each write to the TLS
// connection fills several records.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// writeTar writes m's host content to w: a File mount as the one entry [remote.FileName],
// a directory by an lstat walk beneath its source that never follows a symlink (a symlink is
// an entry of its own, its target as written), holding only regular files, directories and
// symlinks (sockets, FIFOs and devices are left out).
func writeTar(w io.Writer, m *mountRecord) error {
	tw := tar.NewWriter(w)
	if m.File {
		f, err := os.Open(m.Src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", m.Dst)
		}
		if err := writeTarFile(tw, remote.FileName, f, fi); err != nil {
			return err
		}
		return tw.Close()
	}
	root, err := os.OpenRoot(m.Src)
	if err != nil {
		return err
	}
	defer root.Close()
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		return writeEntry(tw, root, name, d)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, root *os.Root, name string, d fs.DirEntry) error {
	switch d.Type() {
	case fs.ModeDir:
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, Format: tar.FormatPAX})
	case fs.ModeSymlink:
		target, err := root.Readlink(name)
		if err != nil {
			return err
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, Format: tar.FormatPAX})
	case 0:
		// O_NOFOLLOW: an entry swapped for a symlink since the listing is refused, not
		// followed (os.Root would follow it within the tree).
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
			return fmt.Errorf("%s changed while read", name)
		}
		return writeTarFile(tw, name, f, fi)
	}
	return nil // a socket, FIFO or device: not content
}

func writeTarFile(tw *tar.Writer, name string, f *os.File, fi fs.FileInfo) error {
	mode := int64(0o644)
	if fi.Mode()&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Clean(name), Size: fi.Size(), Mode: mode, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	n, err := io.CopyBuffer(tw, io.LimitReader(f, fi.Size()), *buf)
	if err != nil {
		return err
	}
	if n != fi.Size() {
		return errors.New(name + " shrank while read")
	}
	return nil
}
