package audit

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// minAlongside is the smallest batch [Log.AppendAllAlongside] encodes on a second goroutine:
// below it the goroutine's start and hand-over cost more than the encoding it moves.
const minAlongside = 16

// AppendAllAlongside is [Log.AppendAllWith] for a writer whose transaction also has rows of
// its own to write: it reads the tree (which fixes the entries' sequence numbers and time),
// then encodes and hashes the entries on a second goroutine while rows runs on the caller's,
// then inserts them. The entries, their bytes and their order are exactly AppendAllWith's;
// only the CPU work that needs no database (canonical JSON, SHA-256) runs beside the
// caller's statements instead of after them. rows runs inside tx and must not append to the
// log; its error is returned (after the encoding goroutine has finished) and no entry is
// inserted. Entries' Details must
// not change until it returns.
func (l *Log) AppendAllAlongside(ctx context.Context, tx *sql.Tx, st *Statements, entries []Entry, rows func() error) (int64, error) {
	ctx = context.WithoutCancel(ctx)
	if len(entries) < minAlongside {
		if err := rows(); err != nil {
			return 0, err
		}
		return l.appendAll(ctx, tx, st.st, entries)
	}
	a, err := newAppenderWith(ctx, tx, st.st)
	if err != nil {
		return 0, fmt.Errorf("append audit entries: %w", err)
	}
	a.sparse = l.sparse
	a.withChunks(ctx, st.st)
	defer a.close()
	first := a.next()
	at := l.now().UTC().Format(time.RFC3339Nano)
	bodies, leaves := make([][]byte, len(entries)), make([][]byte, len(entries))
	encoded := make(chan error, 1)
	go func() {
		for i, e := range entries {
			body, err := encodeEntry(first+int64(i), at, e)
			if err != nil {
				encoded <- err
				return
			}
			bodies[i], leaves[i] = body, LeafHash(body)
		}
		encoded <- nil
	}()
	rowsErr := rows()
	encErr := <-encoded
	if rowsErr != nil {
		return 0, rowsErr
	}
	if encErr != nil {
		return 0, encErr
	}
	if err := a.writeLeaves(ctx, at, entries, bodies, leaves); err != nil {
		return 0, err
	}
	if err := a.save(ctx); err != nil {
		return 0, err
	}
	return first, nil
}
