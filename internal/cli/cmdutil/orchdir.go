package cmdutil

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/home"
)

// OrchDir returns AGORA_HOME/orch, creating it 0700: agora orch serve's socket and orch.db,
// and the resident dispatcher's, live there.
func (f *Factory) OrchDir() (dir string, err error) {
	h, err := f.HomeDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(h, home.OrchDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}
