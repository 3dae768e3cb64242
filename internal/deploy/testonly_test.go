package deploy

import (
	"context"

	"github.com/agora-dev/agora/internal/catalog/provision"
)

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

// Load reads and parses the manifest at path.
func Load(path string) (*Source, error) {
	s, errs, err := load(path)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// Prepare validates every declared entry against the catalog and the files it names, and
// returns the pending versions in apply order (capabilities, subagents, envs, workspaces). Every
// entry is checked even after one fails; all problems are returned together.
func (s *Source) Prepare(ctx context.Context, w *provision.Writer, getenv func(string) string) ([]*provision.Pending, error) {
	return s.prepare(ctx, w, getenv, nil)
}
