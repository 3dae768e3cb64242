package netgw

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSocketPath is the longest path Linux takes in a Unix socket address (sun_path less its
// terminating NUL).
const maxSocketPath = 107

// shortSocketPath returns a path to dir/name that fits a socket address: the path itself when
// it fits, else "/proc/self/fd/N/name" through an O_PATH descriptor of dir, which the caller
// closes once the socket is bound or connected. Session directories sit below AGORA_HOME and
// carry a dispatch id of up to 128 bytes, so their paths can be longer than a socket address.
func shortSocketPath(path string) (string, func(), error) {
	if len(path) <= maxSocketPath {
		return path, func() {}, nil
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open socket directory: %w", err)
	}
	short := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + filepath.Base(path)
	if len(short) > maxSocketPath {
		unix.Close(fd)
		return "", nil, fmt.Errorf("socket name %q is too long", filepath.Base(path))
	}
	return short, func() { unix.Close(fd) }, nil
}

// listenUnix listens on the Unix socket path, replacing a stale socket file there, with the
// socket file's mode set to 0600.
func listenUnix(path string) (*net.UnixListener, error) {
	addr, done, err := shortSocketPath(path)
	if err != nil {
		return nil, err
	}
	defer done()
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", filepath.Base(path), err)
	}
	// The listener must not unlink the short /proc path on Close; the session directory
	// goes as a whole.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen on %s: %w", filepath.Base(path), err)
	}
	return ln, nil
}

// dialUnix connects to the Unix socket at path, however long the path is.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	addr, done, err := shortSocketPath(path)
	if err != nil {
		return nil, err
	}
	defer done()
	var d net.Dialer
	return d.DialContext(ctx, "unix", addr)
}
