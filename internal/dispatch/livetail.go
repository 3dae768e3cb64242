package dispatch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// LiveTail returns up to limit bytes of the end of dispatch id's live stdout (stderr when
// stderr), the log its supervisor writes, redacted, in the stage directory (never bound into
// the sandbox). A dispatch without one (not started yet, or cleaned up) has an empty tail.
func (d *Dispatcher) LiveTail(id string, stderr bool, limit int64) ([]byte, error) {
	if id == "" || filepath.Base(id) != id || id == "." || id == ".." {
		return nil, fmt.Errorf("dispatch id %q: %w", id, ErrNotFound)
	}
	name := stdoutLog
	if stderr {
		name = stderrLog
	}
	fh, err := os.OpenFile(filepath.Join(d.StateDir, id, name), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dispatch %s: open its live log: %w", id, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("dispatch %s: its live log is not a regular file", id)
	}
	off := max(st.Size()-limit, 0)
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(fh, limit))
}
