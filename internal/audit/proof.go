package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
)

// TreeSize returns the number of leaves in the stored tree. A log whose tree lags its entries
// (written before the tree existed) catches up at the next [Log.Append] or checkpoint.
func TreeSize(ctx context.Context, q Querier) (uint64, error) {
	var size int64
	err := q.QueryRowContext(ctx, `SELECT size FROM audit_tree WHERE id = 0`).Scan(&size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read audit tree size: %w", err)
	}
	return uint64(size), nil
}

// RootAt returns the RFC 6962 root hash of the first size leaves, from stored nodes.
func RootAt(ctx context.Context, q Querier, size uint64) ([]byte, error) {
	if err := checkSize(ctx, q, size); err != nil {
		return nil, fmt.Errorf("root of audit tree at %d: %w", size, err)
	}
	ids := compact.RangeNodes(0, size, nil)
	hashes, err := readNodes(ctx, q, ids)
	if err != nil {
		return nil, fmt.Errorf("root of audit tree at %d: %w", size, err)
	}
	r, err := rangeFactory.NewRange(0, size, hashes)
	if err != nil {
		return nil, fmt.Errorf("root of audit tree at %d: %w", size, err)
	}
	return rootOf(r), nil
}

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

// ConsistencyProof returns the RFC 6962 consistency proof from the tree of size1 leaves to
// the tree of size2 leaves, read from stored nodes.
func ConsistencyProof(ctx context.Context, q Querier, size1, size2 uint64) ([][]byte, error) {
	if err := checkSize(ctx, q, size2); err != nil {
		return nil, fmt.Errorf("consistency proof from %d to %d: %w", size1, size2, err)
	}
	n, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("consistency proof: %w", err)
	}
	return rehash(ctx, q, n)
}

func checkSize(ctx context.Context, q Querier, size uint64) error {
	have, err := TreeSize(ctx, q)
	if err != nil {
		return err
	}
	if size > have {
		return fmt.Errorf("the tree has only %d leaves", have)
	}
	return nil
}

func rehash(ctx context.Context, q Querier, n proof.Nodes) ([][]byte, error) {
	hashes, err := readNodes(ctx, q, n.IDs)
	if err != nil {
		return nil, err
	}
	p, err := n.Rehash(hashes, hasher.HashChildren)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// inclusionProofs returns the inclusion proofs of every index in the tree of size leaves,
// reading each stored node once, in a few large queries.
func inclusionProofs(ctx context.Context, q Querier, indexes []uint64, size uint64) ([][][]byte, error) {
	if err := checkSize(ctx, q, size); err != nil {
		return nil, fmt.Errorf("inclusion proofs in %d: %w", size, err)
	}
	plans := make([]proof.Nodes, len(indexes))
	var all []compact.NodeID
	for i, index := range indexes {
		n, err := proof.Inclusion(index, size)
		if err != nil {
			return nil, fmt.Errorf("inclusion proof: %w", err)
		}
		plans[i] = n
		all = append(all, n.IDs...)
	}
	cache := map[int64][]byte{}
	if err := fetchNodes(ctx, q, all, cache); err != nil {
		return nil, err
	}
	out := make([][][]byte, len(indexes))
	for i, n := range plans {
		hashes, err := fromCache(n.IDs, cache)
		if err != nil {
			return nil, err
		}
		if out[i], err = n.Rehash(hashes, hasher.HashChildren); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readNodes returns the stored hashes of ids, in order.
func readNodes(ctx context.Context, q Querier, ids []compact.NodeID) ([][]byte, error) {
	cache := make(map[int64][]byte, len(ids))
	if err := fetchNodes(ctx, q, ids, cache); err != nil {
		return nil, err
	}
	return fromCache(ids, cache)
}

// maxNodesPerQuery keeps each IN list under SQLite's variable limit (a derived node adds up to
// 2^(storedFromLevel-1) leaves past it).
const maxNodesPerQuery = 500

// storedFromLevel is the lowest level of the tree a sparse writer stores in audit_nodes
// ([Log.SparseTree]); readers compute every node below it from its 2, 4 or 8 leaves, whose
// hashes audit_entries holds anyway, whether the writer stored it or not.
const storedFromLevel = 4

// fetchNodes reads the hashes of ids not yet in cache into it: leaves from audit_entries,
// subtree roots from audit_nodes, in one statement per about maxNodesPerQuery ids. A node
// below storedFromLevel is computed from its leaves, stored or not (a sparse writer leaves
// it out: [Log.SparseTree]), so every log reads the same way.
func fetchNodes(ctx context.Context, q Querier, ids []compact.NodeID, cache map[int64][]byte) error {
	var leaves, inner []any
	flush := func() error {
		if len(leaves)+len(inner) == 0 {
			return nil
		}
		defer func() { leaves, inner = leaves[:0], inner[:0] }()
		var parts []string
		if len(inner) > 0 {
			parts = append(parts, `SELECT id, hash FROM audit_nodes WHERE id IN (`+placeholders(len(inner))+`)`)
		}
		if len(leaves) > 0 {
			parts = append(parts, `SELECT seq, leaf_hash FROM audit_entries WHERE seq IN (`+placeholders(len(leaves))+`)`)
		}
		rows, err := q.QueryContext(ctx, strings.Join(parts, " UNION ALL "), append(inner, leaves...)...)
		if err != nil {
			return fmt.Errorf("read audit nodes: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var k int64
			var h []byte
			if err := rows.Scan(&k, &h); err != nil {
				return fmt.Errorf("read audit nodes: %w", err)
			}
			cache[k] = h
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read audit nodes: %w", err)
		}
		return nil
	}
	asked := map[int64]bool{}
	askLeaf := func(index uint64) {
		if k := int64(index); cache[k] == nil && !asked[k] {
			asked[k] = true
			leaves = append(leaves, k)
		}
	}
	var derived []compact.NodeID
	for _, id := range ids {
		k := nodeKey(id)
		if _, ok := cache[k]; ok || asked[k] {
			continue
		}
		asked[k] = true
		switch {
		case id.Level == 0:
			leaves = append(leaves, k)
		case id.Level < storedFromLevel:
			derived = append(derived, id)
			first := id.Index << id.Level
			for i := range uint64(1) << id.Level {
				askLeaf(first + i)
			}
		default:
			inner = append(inner, k)
		}
		if len(leaves)+len(inner) >= maxNodesPerQuery {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	for _, id := range derived {
		if h, ok := subtreeFromLeaves(id, cache); ok {
			cache[nodeKey(id)] = h
		}
	}
	return nil
}

// subtreeFromLeaves is the hash of node id computed from its leaves in cache; false when one is
// missing or malformed (the caller then finds the node missing: ErrTampered).
func subtreeFromLeaves(id compact.NodeID, cache map[int64][]byte) ([]byte, bool) {
	if id.Level == 0 {
		h := cache[int64(id.Index)]
		return h, len(h) == hasher.Size()
	}
	left, ok := subtreeFromLeaves(compact.NewNodeID(id.Level-1, id.Index*2), cache)
	if !ok {
		return nil, false
	}
	right, ok := subtreeFromLeaves(compact.NewNodeID(id.Level-1, id.Index*2+1), cache)
	if !ok {
		return nil, false
	}
	return hasher.HashChildren(left, right), true
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func fromCache(ids []compact.NodeID, cache map[int64][]byte) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := cache[nodeKey(id)]
		if !ok || len(h) != hasher.Size() {
			return nil, fmt.Errorf("audit node (level %d, index %d) is missing or malformed: %w", id.Level, id.Index, ErrTampered)
		}
		out[i] = h
	}
	return out, nil
}
