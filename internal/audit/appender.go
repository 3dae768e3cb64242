package audit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/transparency-dev/merkle/compact"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/jcs"
)

// appender writes a run of entries into one transaction: the tree is read once and the two
// inserts are prepared once, however many entries follow ([Log.AppendAll], a [Batcher]'s
// batch). [appender.save] stores the tree when the run is done; without it the transaction
// MUST NOT commit.
type appender struct {
	tx         *sql.Tx
	r          *compact.Range
	insEntry   *sql.Stmt
	insEntries *sql.Stmt // entryChunk entries in one statement; nil: one at a time
	args       []any     // insEntries' arguments, reused
	insNode    *sql.Stmt
	saveTree   *sql.Stmt // nil: saveTreeSQL is compiled when the run is saved
	sparse     bool      // store only the nodes from storedFromLevel up ([Log.SparseTree])
}

// Statements appenders share.
const (
	insEntrySQL = `INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`
	insNodeSQL  = `INSERT INTO audit_nodes(id, hash) VALUES (?, ?)`
	entryValues = `, (?, ?, ?, ?, ?, ?, ?)`
)

// entryChunk is how many entries one insEntries statement writes: a batch of hundreds of
// entries (the orchestrator's) pays the statement's fixed cost (bind, step, reset) once per
// chunk instead of once per entry. The rows are the single insert's, in the same order.
const entryChunk = 32

// insEntriesSQL is insEntrySQL for entryChunk rows.
func insEntriesSQL() string {
	return insEntrySQL + strings.Repeat(entryValues, entryChunk-1)
}

// newAppender loads the tree in tx and prepares the inserts. ctx should not be cancellable
// (see [Log.AppendAll]): the transaction still ends with its own.
func newAppender(ctx context.Context, tx *sql.Tx) (*appender, error) {
	r, err := loadTree(ctx, tx)
	if err != nil {
		return nil, err
	}
	a := &appender{tx: tx, r: r}
	if a.insEntry, err = tx.PrepareContext(ctx, insEntrySQL); err != nil {
		return nil, err
	}
	if a.insNode, err = tx.PrepareContext(ctx, insNodeSQL); err != nil {
		a.insEntry.Close()
		return nil, err
	}
	return a, nil
}

// newAppenderWith is [newAppender] over statements st prepared on the pool once: in tx they
// are compiled again only on a connection that has not run them yet.
func newAppenderWith(ctx context.Context, tx *sql.Tx, st *statements) (*appender, error) {
	load := tx.StmtContext(ctx, st.loadTree)
	defer load.Close()
	r, err := loadTreeRow(ctx, tx, load.QueryRowContext(ctx))
	if err != nil {
		return nil, err
	}
	return &appender{tx: tx, r: r, insEntry: tx.StmtContext(ctx, st.insEntry),
		insNode: tx.StmtContext(ctx, st.insNode), saveTree: tx.StmtContext(ctx, st.saveTree)}, nil
}

// withChunks makes a write entryChunk entries a statement in [appender.writeLeaves], with
// st's multi-row insert.
func (a *appender) withChunks(ctx context.Context, st *statements) {
	a.insEntries = a.tx.StmtContext(ctx, st.insEntries)
}

// close releases the statements (the transaction's hold on them; those prepared on the pool
// stay prepared there).
func (a *appender) close() {
	a.insEntry.Close()
	a.insNode.Close()
	if a.insEntries != nil {
		a.insEntries.Close()
	}
	if a.saveTree != nil {
		a.saveTree.Close()
	}
}

// statements are an appender's four statements prepared on the pool, for a writer that
// appends batch after batch (a [Batcher]): compiling them for every transaction was a third
// of a small batch's time (the MCP server audits every call). Close them when the
// writer is done.
type statements struct {
	loadTree, insEntry, insNode, saveTree, insEntries *sql.Stmt
}

// prepareStatements prepares the appender's statements on db.
func prepareStatements(ctx context.Context, db *sql.DB) (*statements, error) {
	st := &statements{}
	for _, p := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&st.loadTree, loadTreeSQL}, {&st.insEntry, insEntrySQL}, {&st.insNode, insNodeSQL}, {&st.saveTree, saveTreeSQL},
		{&st.insEntries, insEntriesSQL()}} {
		s, err := db.PrepareContext(ctx, p.query)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("prepare audit statements: %w", err)
		}
		*p.stmt = s
	}
	return st, nil
}

// close releases the statements on every connection they were prepared on.
func (st *statements) close() {
	for _, s := range []*sql.Stmt{st.loadTree, st.insEntry, st.insNode, st.saveTree, st.insEntries} {
		if s != nil {
			s.Close()
		}
	}
}

// next is the sequence number the next entry gets.
func (a *appender) next() int64 { return int64(a.r.End()) }

// encodeEntry is the canonical JSON of e as entry seq stamped at: the bytes that are hashed.
// It fails only on details that have no canonical form (see [jcs.Marshal]).
func encodeEntry(seq int64, at string, e Entry) ([]byte, error) {
	return appendEntry(make([]byte, 0, 512), seq, at, e)
}

// appendEntry is [encodeEntry] appending to dst.
func appendEntry(dst []byte, seq int64, at string, e Entry) ([]byte, error) {
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	// The envelope's keys in RFC 8785 order, the bytes jcs.Marshal writes for the same map
	// without building and sorting one per entry.
	body, err := jcs.AppendObject(dst, jcs.Field{Key: "actor", Value: e.Actor}, jcs.Field{Key: "details", Value: details},
		jcs.Field{Key: "kind", Value: e.Kind}, jcs.Field{Key: "seq", Value: seq}, jcs.Field{Key: "subject", Value: e.Subject},
		jcs.Field{Key: "time", Value: at})
	if err != nil {
		return nil, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	return body, nil
}

// write stores body, the encoding of e as entry [appender.next] stamped at, and the tree nodes
// its leaf completes.
func (a *appender) write(ctx context.Context, at string, e Entry, body []byte) error {
	return a.writeLeaf(ctx, at, e, body, verify.LeafHash(body))
}

// writeLeaf is [appender.write] with body's leaf hash computed by the caller.
func (a *appender) writeLeaf(ctx context.Context, at string, e Entry, body, leaf []byte) error {
	seq := a.next()
	if uint64(seq) >= maxTreeSize {
		return fmt.Errorf("append audit entries: the log is full at %d entries", seq)
	}
	if _, err := a.insEntry.ExecContext(ctx, seq, at, e.Kind, e.Subject, e.Actor, body, leaf); err != nil {
		return fmt.Errorf("append audit entry %d: %w", seq, err)
	}
	return a.appendLeaf(ctx, seq, leaf)
}

// writeLeaves is [appender.writeLeaf] for each of entries in order (bodies[i] and leaves[i]
// are entries[i]'s), entryChunk rows a statement when [appender.withChunks] was called.
// ready(n) returns once bodies and leaves [0, n) are set (or why they never will be): each
// chunk waits only for its own entries.
func (a *appender) writeLeaves(ctx context.Context, at string, entries []Entry, bodies, leaves [][]byte, ready func(n int) error) error {
	i := 0
	for ; a.insEntries != nil && len(entries)-i >= entryChunk; i += entryChunk {
		first := a.next()
		if uint64(first)+entryChunk > maxTreeSize {
			break // one at a time, to the entry that fills the log
		}
		if err := ready(i + entryChunk); err != nil {
			return err
		}
		args := a.args[:0]
		for j := i; j < i+entryChunk; j++ {
			e := &entries[j]
			args = append(args, first+int64(j-i), at, e.Kind, e.Subject, e.Actor, bodies[j], leaves[j])
		}
		a.args = args
		_, err := a.insEntries.ExecContext(ctx, args...)
		clear(args) // the bodies are the caller's: hold none past the statement
		if err != nil {
			return fmt.Errorf("append audit entries %d-%d: %w", first, first+entryChunk-1, err)
		}
		for j := i; j < i+entryChunk; j++ {
			if err := a.appendLeaf(ctx, first+int64(j-i), leaves[j]); err != nil {
				return err
			}
		}
	}
	if err := ready(len(entries)); err != nil {
		return err
	}
	for ; i < len(entries); i++ {
		if err := a.writeLeaf(ctx, at, entries[i], bodies[i], leaves[i]); err != nil {
			return err
		}
	}
	return nil
}

// appendLeaf adds entry seq's leaf to the tree and stores the nodes it completes.
func (a *appender) appendLeaf(ctx context.Context, seq int64, leaf []byte) error {
	var nodeErr error
	if err := a.r.Append(leaf, func(id compact.NodeID, hash []byte) {
		// Leaves live in audit_entries; a sparse log leaves out the nodes readers compute
		// from them.
		if nodeErr == nil && id.Level > 0 && (!a.sparse || id.Level >= storedFromLevel) {
			_, nodeErr = a.insNode.ExecContext(ctx, nodeKey(id), hash)
		}
	}); err != nil {
		return fmt.Errorf("append audit leaf %d: %w", seq, err)
	}
	if nodeErr != nil {
		return fmt.Errorf("append audit leaf %d: %w", seq, nodeErr)
	}
	return nil
}

// save stores the tree's new state.
func (a *appender) save(ctx context.Context) error {
	if a.saveTree == nil {
		return saveTree(ctx, a.tx, a.r)
	}
	return saveTreeWith(func(args ...any) (sql.Result, error) { return a.saveTree.ExecContext(ctx, args...) }, a.r)
}
