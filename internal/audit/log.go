// Package audit owns agora's append-only audit logs: one per database (agora.db, orch.db). An
// entry is RFC 8785 canonical JSON, hashed as an RFC 6962 leaf
// (https://www.rfc-editor.org/rfc/rfc6962#section-2.1), and appended in the SAME transaction as
// the state change it records, so a change and its entry commit or vanish together. The same
// transaction stores the completed subtrees of the Merkle tree (from level 4 up for a
// [Log.SparseTree]; readers compute a lower node it left out from at most 8 leaf hashes), so
// inclusion and consistency proofs are read, never recomputed from all leaves.
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

	"github.com/agora-dev/agora/internal/audit/verify"
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
	now    func() time.Time
	sparse bool // see SparseTree
}

// SparseTree returns a log like l whose appends store the tree's nodes only from level 4 up
// (about one node row per eight entries instead of one per entry): readers compute a lower
// node that is not stored from the leaf hashes audit_entries holds, so proofs, roots and
// bundles are the same bytes. A log's writers may mix both. The orchestrator (hundreds of
// entries a commit), the MCP server and dispatch records (a commit of one or two entries for
// each tool call or step, where the node's page is one of the six or seven a commit writes)
// use it: what it saves is a b-tree insert, and mostly a page, per entry.
func (l *Log) SparseTree() *Log {
	c := *l
	c.sparse = true
	return &c
}

// New returns a log that stamps entries with now (time.Now when nil).
func New(now func() time.Time) *Log {
	if now == nil {
		now = time.Now
	}
	return &Log{now: now}
}

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
	body, err := encodeEntry(seq, at, e)
	if err != nil {
		return 0, err
	}
	leaf := verify.LeafHash(body)
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		seq, at, e.Kind, e.Subject, e.Actor, body, leaf); err != nil {
		return 0, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	if err := appendLeaf(ctx, tx, r, leaf, l.sparse); err != nil {
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
	return l.appendAll(ctx, tx, nil, entries)
}

// Statements are a log's statements prepared once on a database's pool, for a writer that
// appends in transaction after transaction ([Log.AppendAllWith]): compiling them for every
// transaction is a fixed cost per commit. Close them when the writer is done.
type Statements struct{ st *statements }

// PrepareStatements prepares the log's statements on db.
func PrepareStatements(ctx context.Context, db *sql.DB) (*Statements, error) {
	st, err := prepareStatements(ctx, db)
	if err != nil {
		return nil, err
	}
	return &Statements{st: st}, nil
}

// Close releases the statements on every connection they were prepared on.
func (s *Statements) Close() { s.st.close() }

// AppendAllWith is [Log.AppendAll] with statements st prepared on tx's database: in tx they
// are compiled again only on a connection that has not run them yet. The entries and their
// bytes are the same as AppendAll's.
func (l *Log) AppendAllWith(ctx context.Context, tx *sql.Tx, st *Statements, entries []Entry) (int64, error) {
	return l.appendAll(ctx, tx, st.st, entries)
}

// appendAll is AppendAll with st (nil: prepared in tx).
func (l *Log) appendAll(ctx context.Context, tx *sql.Tx, st *statements, entries []Entry) (int64, error) {
	// The statements run under the transaction, which still ends with ctx; a cancellable ctx
	// on each statement would only cost a goroutine per statement in the driver. (Statements
	// of many rows were tried too: SQLite compiles a long VALUES list slower than it runs
	// the prepared one-row statement that many times.)
	ctx = context.WithoutCancel(ctx)
	if len(entries) == 0 {
		r, err := loadTree(ctx, tx)
		if err != nil {
			return 0, fmt.Errorf("append audit entries: %w", err)
		}
		return int64(r.End()), nil
	}
	var a *appender
	var err error
	if st != nil {
		a, err = newAppenderWith(ctx, tx, st)
	} else {
		a, err = newAppender(ctx, tx)
	}
	if err != nil {
		return 0, fmt.Errorf("append audit entries: %w", err)
	}
	a.sparse = l.sparse
	defer a.close()
	first := a.next()
	at := l.now().UTC().Format(time.RFC3339Nano)
	for _, e := range entries {
		body, err := encodeEntry(a.next(), at, e)
		if err != nil {
			return 0, err
		}
		if err := a.write(ctx, at, e, body); err != nil {
			return 0, err
		}
	}
	if err := a.save(ctx); err != nil {
		return 0, err
	}
	return first, nil
}
