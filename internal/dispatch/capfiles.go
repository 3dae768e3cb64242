package dispatch

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// stageCapabilityFiles lays each pinned capability's files out at dir/NAME, from the
// catalog's content (the digests the record pins), never from anything a sandbox wrote. The
// sandbox sees dir read-only at /agora/capabilities; the files are not copied into the
// workspace, so none of them can replace a file of the repository. Modes are private, as
// everywhere in AGORA_HOME: handOver gives the tree to the sandbox user.
func (d *Dispatcher) stageCapabilityFiles(p *pinned, dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, v := range p.capabilities {
		data, err := d.Catalog.Content(v)
		if err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		files, err := catalog.ReadStored(data)
		if err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		capDir := filepath.Join(dir, v.Name)
		if err := os.Mkdir(capDir, 0o700); err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		root, err := os.OpenRoot(capDir)
		if err != nil {
			return fmt.Errorf("capability %q: %w", v.Name, err)
		}
		for _, f := range files {
			if f.Path == catalog.CapabilityFile {
				continue
			}
			if err := catalog.Place(root, f, 0o700, 0o500); err != nil {
				root.Close()
				return fmt.Errorf("capability %q: %w", v.Name, err)
			}
		}
		root.Close()
	}
	return nil
}

// capabilityFilesDir is the stage's layout of the capabilities' files.
func (s *stage) capabilityFilesDir() string { return filepath.Join(s.dir, wire.CapabilityFilesDir) }
