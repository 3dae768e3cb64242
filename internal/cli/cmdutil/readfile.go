package cmdutil

import "github.com/agora-dev/agora/internal/capped"

// MaxCAFileSize caps a CA bundle a person names (an rfc3161 anchor's ca_file, agora verify
// --tsa-ca).
const MaxCAFileSize = 1 << 20

// ReadLimited reads a file a person named on the command line or in agora.yaml (a spec, a
// prompt, a key, a CA), refusing one larger than limit: the one place commands read such a
// file, so the host-read audit (internal/sandboxreads_test.go) lists it once.
func ReadLimited(path string, limit int64) ([]byte, error) {
	return capped.ReadFile(path, limit)
}
