package cmdutil

import "github.com/agora-dev/agora/internal/capped"

// ReadLimited reads a file a person named on the command line or in agora.yaml (a spec, a
// prompt, a key, a CA), refusing one larger than limit: the one place commands read such a
// file, so the host-read audit (internal/sandboxreads_test.go) lists it once.
func ReadLimited(path string, limit int64) ([]byte, error) {
	return capped.ReadFile(path, limit)
}
