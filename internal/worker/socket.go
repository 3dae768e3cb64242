package worker

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/worker/wire"
)

const (
	// maxSocketPath is the longest Unix socket path Linux accepts.
	maxSocketPath = 107
)

// gatewaySocket returns the path of the gateway's socket under root, checked to be a socket.
func gatewaySocket(root string) (string, error) {
	p, err := socketPath(root, wire.GatewaySocket)
	if err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	return p, nil
}

// socketPath returns the path of the host's socket name in the gateway directory under root,
// checked to be a socket. A path too long for a socket address is resolved through its
// directory's symlink (the host links a long stage path to a short directory).
func socketPath(root, name string) (string, error) {
	path := filepath.Join(root, wire.GatewayDir, name)
	if len(path) > maxSocketPath {
		dir, err := filepath.EvalSymlinks(filepath.Dir(path))
		if err != nil {
			return "", err
		}
		path = filepath.Join(dir, name)
		if len(path) > maxSocketPath {
			return "", fmt.Errorf("socket path %q is over the %d byte limit", path, maxSocketPath)
		}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("no socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return "", fmt.Errorf("%s is not a socket", path)
	}
	return path, nil
}
