package modelgw

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

const (
	// maxSocketPath is the longest Unix socket path Linux accepts (sun_path less its NUL).
	maxSocketPath = 107
	// staleProbeTimeout bounds the dial that tells a live socket from a stale one.
	staleProbeTimeout = time.Second
)

// listenUnix creates a Unix socket at path with mode 0600 and no window in which it has any
// other mode: it is bound in a fresh 0700 directory beside path, chmodded there, then renamed
// into place. A stale socket at path is replaced; a live socket, or anything that is not a
// socket, is refused and left alone. It returns the listener and the socket file's info, for
// [removeSocket].
func listenUnix(path string) (*net.UnixListener, os.FileInfo, error) {
	if err := checkStale(path); err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".gateway-")
	if err != nil {
		return nil, nil, fmt.Errorf("listen gateway socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	switch {
	case len(path) > maxSocketPath:
		return nil, nil, fmt.Errorf("listen gateway socket %q: path is %d bytes, over the %d byte limit of a Unix socket", path, len(path), maxSocketPath)
	case len(bound) > maxSocketPath:
		return nil, nil, fmt.Errorf("listen gateway socket %q: the temporary name %q beside it is over the %d byte limit of a Unix socket; use a shorter directory", path, bound, maxSocketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("listen gateway socket: %w", err)
	}
	ln.SetUnlinkOnClose(false) // the bound name is renamed away; removeSocket removes the file
	fi, err := place(bound, path)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, fi, nil
}

// place sets the socket's mode and renames it to path.
func place(bound, path string) (os.FileInfo, error) {
	if err := os.Chmod(bound, 0o600); err != nil {
		return nil, fmt.Errorf("listen gateway socket: %w", err)
	}
	if err := os.Rename(bound, path); err != nil {
		return nil, fmt.Errorf("listen gateway socket: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("listen gateway socket: %w", err)
	}
	return fi, nil
}

// checkStale accepts a missing path or a socket nobody listens on.
func checkStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen gateway socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("listen gateway socket %q: the path exists and is not a socket", path)
	}
	conn, err := net.DialTimeout("unix", path, staleProbeTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("listen gateway socket %q: another process is listening on it", path)
	}
	return nil
}

// removeSocket removes path if it is still the socket Listen created.
func removeSocket(path string, created os.FileInfo) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove gateway socket: %w", err)
	}
	if !os.SameFile(fi, created) {
		return nil // replaced by someone else since; not ours to remove
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove gateway socket: %w", err)
	}
	return nil
}
