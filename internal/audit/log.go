// Package audit owns agora's append-only audit logs: one per database (agora.db, orch.db). An
// entry is RFC 8785 canonical JSON, hashed as an RFC 6962 leaf
// (https://www.rfc-editor.org/rfc/rfc6962#section-2.1), and appended in the SAME transaction as
// the state change it records, so a change and its entry commit or vanish together. The same
// transaction stores every completed subtree of the Merkle tree, so inclusion and consistency
// proofs are read, never recomputed from all leaves.
//
// A [Checkpointer] signs C2SP tlog-checkpoints (https://c2sp.org/tlog-checkpoint) of the tree,
// only after checking the previous one is a prefix, and hands each to the configured anchors.
// [Checkpointer.Export] builds the bundle that package verify checks offline.
//
// audit runs on the host side. Entries hold names, hashes and decisions: never secret values,
// tokens or raw tool arguments. The wire formats live in package verify, which imports no
// database code; the anchors live in package anchor.
package audit

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/jcs"
)

// Entry is what a caller records. Details MUST NOT contain secrets; put hashes of sensitive
// arguments instead.
type Entry struct {
	Actor   string         // OS user, CI actor, MCP client name, or dispatch id with role
	Kind    string         // catalog.*, dispatch.*, orch.*, tool.*, mcp.*
	Subject string         // what the entry is about: "capability/repo-tools", a dispatch id
	Details map[string]any // canonical-JSON-encodable values only (see [jcs.Marshal])
}

// Log appends entries to the audit_entries table of one database.
type Log struct {
	now func() time.Time
}

// New returns a log that stamps entries with now (time.Now when nil).
func New(now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{now: now}
}

// LeafHash is the RFC 6962 hash of a leaf: SHA-256(0x00 || data).
func LeafHash(data []byte) []byte { return verify.LeafHash(data) }

// Append records e inside tx and returns its sequence number, which is its leaf index. The
// caller's transaction MUST be the one that makes the change e describes. The tree's new nodes
// are stored in tx too: O(log n) rows read and written, whatever the log's size.
func (l *Log) Append(ctx context.Context, tx *sql.Tx, e Entry) (int64, error) {
	r, err := loadTree(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	seq := int64(r.End())
	at := l.now().UTC().Format(time.RFC3339Nano)
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	body, err := jcs.Marshal(map[string]any{
		"seq":     seq,
		"time":    at,
		"actor":   e.Actor,
		"kind":    e.Kind,
		"subject": e.Subject,
		"details": details,
	})
	if err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	leaf := LeafHash(body)
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		seq, at, e.Kind, e.Subject, e.Actor, body, leaf); err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	if err := appendLeaf(ctx, tx, r, leaf); err != nil {
		return 0, err
	}
	if err := saveTree(ctx, tx, r); err != nil {
		return 0, err
	}
	return seq, nil
}

// AppendAll records entries inside tx, in order, and returns the sequence number of the first.
// It is [Log.Append] for a batch: the tree is read and saved once and the two insert
// statements are prepared once, so a scheduler that commits a batch of transitions pays for
// one tree update, not one per entry.
func (l *Log) AppendAll(ctx context.Context, tx *sql.Tx, entries []Entry) (int64, error) {
	// The statements run under the transaction, which still ends with ctx; a cancellable ctx
	// on each statement would only cost a goroutine per statement in the driver. (Statements
	// of many rows were tried too: SQLite compiles a long VALUES list slower than it runs
	// the prepared one-row statement that many times.)
	ctx = context.WithoutCancel(ctx)
	r, err := loadTree(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("append audit entries: %w", err)
	}
	first := int64(r.End())
	if len(entries) == 0 {
		return first, nil
	}
	insEntry, err := tx.PrepareContext(ctx, `INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, fmt.Errorf("append audit entries: %w", err)
	}
	defer insEntry.Close()
	insNode, err := tx.PrepareContext(ctx, `INSERT INTO audit_nodes(id, hash) VALUES (?, ?)`)
	if err != nil {
		return 0, fmt.Errorf("append audit entries: %w", err)
	}
	defer insNode.Close()
	at := l.now().UTC().Format(time.RFC3339Nano)
	var nodeErr error
	for i, e := range entries {
		seq := first + int64(i)
		if uint64(seq) >= maxTreeSize {
			return 0, fmt.Errorf("append audit entries: the log is full at %d entries", seq)
		}
		details := e.Details
		if details == nil {
			details = map[string]any{}
		}
		body, err := jcs.Marshal(map[string]any{
			"seq": seq, "time": at, "actor": e.Actor, "kind": e.Kind, "subject": e.Subject, "details": details,
		})
		if err != nil {
			return 0, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
		}
		leaf := LeafHash(body)
		if _, err := insEntry.ExecContext(ctx, seq, at, e.Kind, e.Subject, e.Actor, body, leaf); err != nil {
			return 0, fmt.Errorf("append audit entry %d: %w", seq, err)
		}
		if err := r.Append(leaf, func(id compact.NodeID, hash []byte) {
			if nodeErr == nil && id.Level > 0 { // leaves live in audit_entries
				_, nodeErr = insNode.ExecContext(ctx, nodeKey(id), hash)
			}
		}); err != nil {
			return 0, fmt.Errorf("append audit leaf %d: %w", seq, err)
		}
		if nodeErr != nil {
			return 0, fmt.Errorf("append audit leaf %d: %w", seq, nodeErr)
		}
	}
	if err := saveTree(ctx, tx, r); err != nil {
		return 0, err
	}
	return first, nil
}
