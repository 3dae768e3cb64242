package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// maxTreeSize bounds the log: node ids pack the index into 56 bits.
const maxTreeSize = 1 << 56

// catchUpBatch is how many entries a catch-up reads at a time.
const catchUpBatch = 1024

// ErrTampered is matched (with [errors.Is]) when the stored log contradicts itself: entries
// missing below the tree's size, a stored leaf hash that is not the hash of its entry, a node
// the tree needs that is gone.
var ErrTampered = errors.New("audit log tampered with")

var hasher = rfc6962.DefaultHasher

var rangeFactory = &compact.RangeFactory{Hash: hashChildren}

// hashChildren is hasher.HashChildren, SHA-256(0x01 || l || r), for two SHA-256 hashes
// without the buffer and hash state it makes per call: appending an entry hashes a node or
// two of the tree.
func hashChildren(l, r []byte) []byte {
	if len(l) != sha256.Size || len(r) != sha256.Size {
		return hasher.HashChildren(l, r)
	}
	var b [1 + 2*sha256.Size]byte
	b[0] = rfc6962.RFC6962NodeHashPrefix
	copy(b[1:], l)
	copy(b[1+sha256.Size:], r)
	sum := sha256.Sum256(b[:])
	return sum[:]
}

// nodeKey packs a node id into the audit_nodes key. A leaf's key is its index, which is also
// its entry's seq: leaves are not stored in audit_nodes (audit_entries.leaf_hash holds them),
// which saves a row per entry.
func nodeKey(id compact.NodeID) int64 { return int64(id.Level)<<56 | int64(id.Index) }

// execer is the write side of a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier reads a database: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type txLike interface {
	execer
	Querier
}

// loadTree reads the tree's compact range and brings it up to date with audit_entries: a log
// whose entries predate the tree (or whose writer was older) is caught up here, in tx.
func loadTree(ctx context.Context, tx txLike) (*compact.Range, error) {
	return loadTreeRow(ctx, tx, tx.QueryRowContext(ctx, loadTreeSQL))
}

// loadTreeSQL reads the tree in one statement: preparing one is most of an append's cost.
const loadTreeSQL = `SELECT (SELECT COALESCE(MAX(seq)+1, 0) FROM audit_entries),
		(SELECT size FROM audit_tree WHERE id = 0), (SELECT frontier FROM audit_tree WHERE id = 0)`

// loadTreeRow is [loadTree] from row, the result of loadTreeSQL in tx (a prepared statement's
// or not).
func loadTreeRow(ctx context.Context, tx txLike, row *sql.Row) (*compact.Range, error) {
	var next int64
	var size sql.NullInt64
	var frontier []byte
	if err := row.Scan(&next, &size, &frontier); err != nil {
		return nil, fmt.Errorf("read audit tree: %w", err)
	}
	if len(frontier)%verify.HashSize != 0 {
		return nil, fmt.Errorf("read audit tree: frontier of %d bytes: %w", len(frontier), ErrTampered)
	}
	hashes := make([][]byte, 0, len(frontier)/verify.HashSize)
	for i := 0; i < len(frontier); i += verify.HashSize {
		hashes = append(hashes, frontier[i:i+verify.HashSize:i+verify.HashSize])
	}
	r, err := rangeFactory.NewRange(0, uint64(size.Int64), hashes)
	if err != nil {
		return nil, fmt.Errorf("read audit tree: %v: %w", err, ErrTampered)
	}
	switch {
	case next < size.Int64:
		return nil, fmt.Errorf("audit log ends at %d entries but its tree has %d leaves: entries were deleted: %w", next, size.Int64, ErrTampered)
	case next > size.Int64:
		if err := catchUp(ctx, tx, r, uint64(next)); err != nil {
			return nil, err
		}
		if err := saveTree(ctx, tx, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// catchUp appends the leaves of entries [r.End(), next) to r, storing their nodes.
func catchUp(ctx context.Context, tx txLike, r *compact.Range, next uint64) error {
	for r.End() < next {
		type row struct {
			seq         int64
			entry, leaf []byte
		}
		rows, err := tx.QueryContext(ctx, `SELECT seq, entry, leaf_hash FROM audit_entries WHERE seq >= ? ORDER BY seq LIMIT ?`,
			int64(r.End()), catchUpBatch)
		if err != nil {
			return fmt.Errorf("catch up audit tree: %w", err)
		}
		var batch []row
		for rows.Next() {
			var x row
			if err := rows.Scan(&x.seq, &x.entry, &x.leaf); err != nil {
				rows.Close()
				return fmt.Errorf("catch up audit tree: %w", err)
			}
			batch = append(batch, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("catch up audit tree: %w", err)
		}
		if len(batch) == 0 {
			return fmt.Errorf("catch up audit tree: entries end at %d, want %d: %w", r.End(), next, ErrTampered)
		}
		for _, x := range batch {
			if uint64(x.seq) != r.End() {
				return fmt.Errorf("catch up audit tree: entry %d is missing: %w", r.End(), ErrTampered)
			}
			leaf := verify.LeafHash(x.entry)
			if !bytes.Equal(leaf, x.leaf) {
				return fmt.Errorf("catch up audit tree: entry %d: stored leaf hash is not the hash of the entry: %w", x.seq, ErrTampered)
			}
			if err := appendLeaf(ctx, tx, r, leaf, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendLeaf appends leaf to r and stores every subtree root it completes (from
// storedFromLevel up when sparse).
func appendLeaf(ctx context.Context, tx execer, r *compact.Range, leaf []byte, sparse bool) error {
	if r.End() >= maxTreeSize {
		return fmt.Errorf("append audit leaf: the log is full at %d entries", r.End())
	}
	var args []any
	err := r.Append(leaf, func(id compact.NodeID, hash []byte) {
		if id.Level > 0 && (!sparse || id.Level >= storedFromLevel) {
			args = append(args, nodeKey(id), hash)
		}
	})
	if err != nil {
		return fmt.Errorf("append audit leaf %d: %w", r.End(), err)
	}
	if len(args) == 0 {
		return nil
	}
	q := `INSERT INTO audit_nodes(id, hash) VALUES ` + strings.TrimSuffix(strings.Repeat("(?, ?), ", len(args)/2), ", ")
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("append audit leaf %d: %w", r.End()-1, err)
	}
	return nil
}

// saveTree stores r as the tree's state.
func saveTree(ctx context.Context, tx execer, r *compact.Range) error {
	return saveTreeWith(func(args ...any) (sql.Result, error) { return tx.ExecContext(ctx, saveTreeSQL, args...) }, r)
}

// saveTreeSQL stores the tree's size and frontier.
const saveTreeSQL = `INSERT INTO audit_tree(id, size, frontier) VALUES (0, ?, ?)
		ON CONFLICT(id) DO UPDATE SET size = excluded.size, frontier = excluded.frontier`

// saveTreeWith is [saveTree] through exec, which runs saveTreeSQL with its arguments.
func saveTreeWith(exec func(args ...any) (sql.Result, error), r *compact.Range) error {
	frontier := make([]byte, 0, len(r.Hashes())*verify.HashSize)
	for _, h := range r.Hashes() {
		frontier = append(frontier, h...)
	}
	_, err := exec(int64(r.End()), frontier)
	if err != nil {
		return fmt.Errorf("save audit tree: %w", err)
	}
	return nil
}

// rootOf is the RFC 6962 root of a compact range starting at 0.
func rootOf(r *compact.Range) []byte {
	if r.End() == 0 {
		return hasher.EmptyRoot()
	}
	root, _ := r.GetRootHash(nil) // cannot fail: the range starts at 0
	return root
}
