package audit

import (
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
)

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

// InclusionProof returns the RFC 6962 inclusion proof of leaf index in the tree of size
// leaves, read from stored nodes (about log2(size) of them).
func InclusionProof(ctx context.Context, q Querier, index, size uint64) ([][]byte, error) {
	if err := checkSize(ctx, q, size); err != nil {
		return nil, fmt.Errorf("inclusion proof of %d in %d: %w", index, size, err)
	}
	n, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("inclusion proof: %w", err)
	}
	return rehash(ctx, q, n)
}
