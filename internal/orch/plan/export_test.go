package plan

import (
	"context"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// ValidateYAML is [Validate] through strictyaml's YAML path alone, never its JSON fast path:
// the reference FuzzValidateJSON_MatchesYAML holds Validate to.
func ValidateYAML(ctx context.Context, file string, src []byte, refs Refs) (*Plan, error) {
	p, err := validateWith(ctx, file, src, refs, strictyaml.DecodeYAML)
	if err != nil && file == "" {
		return nil, unplaced(err)
	}
	return p, err
}
