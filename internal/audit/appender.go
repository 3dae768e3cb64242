package audit

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/transparency-dev/merkle/compact"

	"github.com/agora-dev/agora/internal/jcs"
)

// appender writes a run of entries into one transaction: the tree is read once and the two
// inserts are prepared once, however many entries follow ([Log.AppendAll], a [Batcher]'s
// batch). [appender.save] stores the tree when the run is done; without it the transaction
// MUST NOT commit.
type appender struct {
	tx       *sql.Tx
	r        *compact.Range
	insEntry *sql.Stmt
	insNode  *sql.Stmt
}

// newAppender loads the tree in tx and prepares the inserts. ctx should not be cancellable
// (see [Log.AppendAll]): the transaction still ends with its own.
func newAppender(ctx context.Context, tx *sql.Tx) (*appender, error) {
	r, err := loadTree(ctx, tx)
	if err != nil {
		return nil, err
	}
	a := &appender{tx: tx, r: r}
	if a.insEntry, err = tx.PrepareContext(ctx, `INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return nil, err
	}
	if a.insNode, err = tx.PrepareContext(ctx, `INSERT INTO audit_nodes(id, hash) VALUES (?, ?)`); err != nil {
		a.insEntry.Close()
		return nil, err
	}
	return a, nil
}

// close releases the prepared statements.
func (a *appender) close() {
	a.insEntry.Close()
	a.insNode.Close()
}

// next is the sequence number the next entry gets.
func (a *appender) next() int64 { return int64(a.r.End()) }

// encodeEntry is the canonical JSON of e as entry seq stamped at: the bytes that are hashed.
// It fails only on details that have no canonical form (see [jcs.Marshal]).
func encodeEntry(seq int64, at string, e Entry) ([]byte, error) {
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	body, err := jcs.Marshal(map[string]any{
		"seq": seq, "time": at, "actor": e.Actor, "kind": e.Kind, "subject": e.Subject, "details": details,
	})
	if err != nil {
		return nil, fmt.Errorf("append audit entry %s: %w", e.Kind, err)
	}
	return body, nil
}

// write stores body, the encoding of e as entry [appender.next] stamped at, and the tree nodes
// its leaf completes.
func (a *appender) write(ctx context.Context, at string, e Entry, body []byte) error {
	seq := a.next()
	if uint64(seq) >= maxTreeSize {
		return fmt.Errorf("append audit entries: the log is full at %d entries", seq)
	}
	leaf := LeafHash(body)
	if _, err := a.insEntry.ExecContext(ctx, seq, at, e.Kind, e.Subject, e.Actor, body, leaf); err != nil {
		return fmt.Errorf("append audit entry %d: %w", seq, err)
	}
	var nodeErr error
	if err := a.r.Append(leaf, func(id compact.NodeID, hash []byte) {
		if nodeErr == nil && id.Level > 0 { // leaves live in audit_entries
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
func (a *appender) save(ctx context.Context) error { return saveTree(ctx, a.tx, a.r) }
