package netgw

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/roottar"
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
// symlinks (sockets, FIFOs and devices are left out). Anything it cannot read fails it.
func writeTar(w io.Writer, m *mountRecord) error {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	o := roottar.Options{Symlinks: true, Buffer: *buf}
	if !m.File {
		return roottar.WriteDir(w, m.Src, o)
	}
	err := roottar.WriteSingle(w, remote.FileName, m.Src, o)
	if errors.Is(err, roottar.ErrNotRegular) {
		return fmt.Errorf("%s is not a regular file", m.Dst)
	}
	return err
}
