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

// DecodeDoc decodes src as a plan document without validating it, through Decode (yamlOnly
// false) or DecodeYAML: what the JSON fast path changes, for BenchmarkParse100k.
func DecodeDoc(file string, src []byte, yamlOnly bool) (any, error) {
	decode := strictyaml.Decode
	if yamlOnly {
		decode = strictyaml.DecodeYAML
	}
	var doc planDoc
	_, err := decode(file, src, &doc)
	return &doc, err
}
