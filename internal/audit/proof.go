package audit

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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

// maxNodesPerQuery keeps each IN list under SQLite's variable limit.
const maxNodesPerQuery = 500

// storedFromLevel is the lowest level of the tree a sparse writer stores in audit_nodes
// ([Log.SparseTree]); readers compute a node below it that is not stored from its 2, 4 or 8
// leaves, whose hashes audit_entries holds anyway.
const storedFromLevel = 4

// fetchNodes reads the hashes of ids not yet in cache into it: subtree roots from
// audit_nodes and leaves from audit_entries, in one statement per about maxNodesPerQuery ids
// or maxSpansPerQuery ranges. A node below storedFromLevel that is not stored (a sparse
// writer leaves those out: [Log.SparseTree]) is computed from its leaves, read in a second
// statement as ranges of seq: a proof's leaves below storedFromLevel lie in one aligned block
// of 16 entries. A log that stores every node reads exactly what it read before.
func fetchNodes(ctx context.Context, q Querier, ids []compact.NodeID, cache map[int64][]byte) error {
	var inner []any
	var spans []leafSpan
	flush := func() error {
		spans = mergeSpans(spans)
		if len(spans)+len(inner) == 0 {
			return nil
		}
		defer func() { spans, inner = spans[:0], inner[:0] }()
		var parts []string
		args := append([]any(nil), inner...)
		if len(inner) > 0 {
			parts = append(parts, `SELECT id, hash FROM audit_nodes WHERE id IN (`+placeholders(len(inner))+`)`)
		}
		for _, sp := range spans {
			parts = append(parts, `SELECT seq, leaf_hash FROM audit_entries WHERE seq >= ? AND seq < ?`)
			args = append(args, int64(sp.from), int64(sp.to))
		}
		rows, err := q.QueryContext(ctx, strings.Join(parts, " UNION ALL "), args...)
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
	var low []compact.NodeID // asked from audit_nodes, computed from leaves if not stored
	for _, id := range ids {
		k := nodeKey(id)
		if _, ok := cache[k]; ok || asked[k] {
			continue
		}
		asked[k] = true
		if id.Level == 0 {
			spans = append(spans, leafSpan{id.Index, id.Index + 1})
		} else {
			inner = append(inner, k)
			if id.Level < storedFromLevel {
				low = append(low, id)
			}
		}
		if len(inner) >= maxNodesPerQuery || len(spans) >= maxSpansPerQuery {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	var derived []compact.NodeID
	for _, id := range low {
		if cache[nodeKey(id)] != nil {
			continue
		}
		derived = append(derived, id)
		spans = append(spans, leafSpan{id.Index << id.Level, (id.Index + 1) << id.Level})
		if len(spans) >= maxSpansPerQuery {
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

// leafSpan is the entries [from, to).
type leafSpan struct{ from, to uint64 }

// maxSpansPerQuery keeps a statement's compound SELECT under SQLite's 500 terms.
const maxSpansPerQuery = 200

// spanGap is how far apart two spans may be and still be read as one: reading a few rows
// more is cheaper than another b-tree search.
const spanGap = 16

// mergeSpans sorts spans and joins those that overlap or lie within spanGap of each other.
func mergeSpans(spans []leafSpan) []leafSpan {
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b leafSpan) int { return cmp.Compare(a.from, b.from) })
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.from <= last.to+spanGap {
			last.to = max(last.to, sp.to)
			continue
		}
		out = append(out, sp)
	}
	return out
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
