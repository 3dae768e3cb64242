package orch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/orch/rowlog"
)

// The fold brings the tasks and attempts tables up to date from row_log (rowlog.go) and
// deletes the records it applied, in one transaction: a fold killed halfway leaves every
// record in the log and the tables as they were. It runs on the engine's goroutine between
// batches, never beside one (SQLite has one writer: a fold holding the lock would delay the
// next commit's fsync), when the engine has been idle for foldIdle, at once (a chunk at a
// time, events first) after a batch that sealed a run, when foldBound records wait, at Open
// (before the runs are loaded) and when Run returns. The rows of a run that no longer exists
// (a sealed run internal/retention purged while a crash left its records unfolded) are not
// written back.
const (
	// foldIdle is how long the engine waits without an event before it folds.
	foldIdle = 50 * time.Millisecond
	// foldChunk is how many records one fold transaction applies at most while the engine
	// runs: a fold of a few thousand rows, so an event waits at most one chunk.
	foldChunk = 64
	// foldBound is how many records may wait: a busy engine that is never idle folds a chunk
	// after every batch past it, so a reader's overlay (overlay.go) stays bounded.
	foldBound = 256
)

// testOnlyInFold, when set (by a test), runs inside a fold's transaction after its rows are
// written and before its records are deleted: a crash there must leave both as they were.
var testOnlyInFold func()

// taskKey names a task row.
type taskKey struct {
	run string
	idx int
}

// rowChanges is what records do to the tables, latest image last: a task's last image, an
// attempt fired in them as it stands (ended or not), and the ends of attempts fired before.
// The engine keeps one for its folds (reset keeps its maps' room and lists); its images are
// held by value, so what a fold reads back is a few lists, not a node per row.
type rowChanges struct {
	tasks    []taskImage     // the tasks updated, in the order first named, each as last written
	taskAt   map[taskKey]int // a task's place in tasks
	inserted []attemptImage  // attempts fired in the records, in the order fired
	insAt    map[string]int  // an attempt's place in inserted
	ends     map[string]endImage
	endOrder []string
	dec      rowlog.Reader // the records' decoder, its lists and values reused
}

func newRowChanges() *rowChanges {
	return &rowChanges{taskAt: map[taskKey]int{}, insAt: map[string]int{}, ends: map[string]endImage{}}
}

// reset empties c for the next fold, keeping its room.
func (c *rowChanges) reset() {
	clear(c.taskAt)
	clear(c.insAt)
	clear(c.ends)
	clear(c.tasks)
	clear(c.inserted)
	clear(c.endOrder)
	c.tasks, c.inserted, c.endOrder = c.tasks[:0], c.inserted[:0], c.endOrder[:0]
}

// add applies rec after everything added before it.
func (c *rowChanges) add(rec *rowlog.Record) error {
	for i := range rec.Tasks {
		t := taskFromWire(&rec.Tasks[i])
		k := taskKey{t.runID, t.idx}
		if at, ok := c.taskAt[k]; ok {
			c.tasks[at] = t
			continue
		}
		c.taskAt[k] = len(c.tasks)
		c.tasks = append(c.tasks, t)
	}
	for i := range rec.Inserts {
		a := attemptFromWire(&rec.Inserts[i])
		if _, dup := c.insAt[a.dispatchID]; dup {
			return fmt.Errorf("%w: attempt %s fired twice", errLogRecord, a.dispatchID)
		}
		// The engine ends an attempt only after firing it. An end before the fire updated no
		// row, as a statement; the fold would apply it after the insert.
		if _, ended := c.ends[a.dispatchID]; ended {
			return fmt.Errorf("%w: attempt %s fired after the log ended it", errLogRecord, a.dispatchID)
		}
		c.insAt[a.dispatchID] = len(c.inserted)
		c.inserted = append(c.inserted, a)
	}
	for i := range rec.Ends {
		x := endFromWire(&rec.Ends[i])
		if at, ok := c.insAt[x.id]; ok {
			a := &c.inserted[at]
			a.state, a.reason, a.endedAt, a.usage, a.verdict = x.state, x.reason, x.endedAt, x.usage, x.verdict
			continue
		}
		if _, ok := c.ends[x.id]; !ok {
			c.endOrder = append(c.endOrder, x.id)
		}
		c.ends[x.id] = x
	}
	return nil
}

// readLog reads up to limit records (0: all) from row_log in q, oldest first, into changes;
// it returns the last record's seq (0 for none) and how many it read. A record that does not
// decode is an error naming it: a damaged orch.db is never skipped.
func readLog(ctx context.Context, q querier, limit int, c *rowChanges) (last int64, n int, err error) {
	query := `SELECT seq, record FROM row_log ORDER BY seq`
	if limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return 0, 0, fmt.Errorf("read orch.db's row log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		// The record is decoded before the next Scan: sql.RawBytes lends the driver's copy
		// of it instead of making one more.
		var b sql.RawBytes
		if err := rows.Scan(&last, &b); err != nil {
			return 0, 0, fmt.Errorf("read orch.db's row log: %w", err)
		}
		rec, err := c.dec.Decode(b)
		if err == nil {
			err = c.add(rec)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("orch.db row log record %d: %w", last, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("read orch.db's row log: %w", err)
	}
	return last, n, nil
}

// querier is what a read needs of a *sql.DB, *sql.Tx or *sql.Conn.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// foldIn applies up to limit records (0: all) to the tables in tx and deletes them; it
// returns how many it applied.
func (e *Engine) foldIn(ctx context.Context, tx *sql.Tx, limit int) (int, error) {
	c := &e.folded
	if c.taskAt == nil {
		*c = *newRowChanges()
	}
	c.reset()
	defer c.reset() // the images are garbage once written: hold none between folds
	last, n, err := readLog(ctx, tx, limit, c)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := c.dropMissingRuns(ctx, tx); err != nil {
		return 0, err
	}
	// The rows whose optional columns hold their defaults through the plain statements
	// (multirow.go), the others whole.
	at, k := splitPlain(e.split, len(c.tasks), func(i int) bool { return c.tasks[i].plain() })
	e.split = at
	err = writeChunked(ctx, tx, &e.stmts.updateTasksPlain, k, &e.args, func(a []any, i int) []any {
		t := &c.tasks[at[i]]
		return append(a, t.state, t.attempts, t.failures, t.dispatchID, t.readySeq, t.runID, t.idx)
	})
	if err == nil {
		err = writeChunked(ctx, tx, &e.stmts.updateTasks, len(at)-k, &e.args, func(a []any, i int) []any {
			t := &c.tasks[at[k+i]]
			return append(a, t.state, t.attempts, t.failures, t.dispatchID, t.readySeq, t.retryAt,
				t.reason, t.detail, t.question, t.answer, t.cancel, t.review, t.runID, t.idx)
		})
	}
	if err != nil {
		return 0, fmt.Errorf("fold the row log into tasks: %w", err)
	}
	at, k = splitPlain(e.split, len(c.inserted), func(i int) bool { return c.inserted[i].plain() })
	e.split = at
	err = writeChunked(ctx, tx, &e.stmts.insertAttemptsWholePlain, k, &e.args, func(a []any, i int) []any {
		x := &c.inserted[at[i]]
		return append(a, x.dispatchID, x.runID, x.taskIdx, x.number, x.state, x.inputs, x.firedAt, x.endedAt)
	})
	if err == nil {
		err = writeChunked(ctx, tx, &e.stmts.insertAttemptsWhole, len(at)-k, &e.args, func(a []any, i int) []any {
			x := &c.inserted[at[k+i]]
			return append(a, x.dispatchID, x.runID, x.taskIdx, x.number, x.state, x.reason, x.parentID, x.inputs, x.firedAt,
				x.endedAt, x.usage, x.verdict)
		})
	}
	if err != nil {
		return 0, fmt.Errorf("fold the row log into attempts: %w", err)
	}
	err = writeChunked(ctx, tx, &e.stmts.endAttempts, len(c.endOrder), &e.args, func(a []any, i int) []any {
		x := c.ends[c.endOrder[i]]
		return append(a, x.state, x.reason, x.endedAt, x.usage, x.verdict, x.id)
	})
	if err != nil {
		return 0, fmt.Errorf("fold the row log into attempts: %w", err)
	}
	if testOnlyInFold != nil {
		testOnlyInFold()
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM row_log WHERE seq <= ?`, last); err != nil {
		return 0, fmt.Errorf("fold the row log: delete the records folded: %w", err)
	}
	return n, nil
}

// fold applies up to limit records (0: all) in a transaction of its own.
func (e *Engine) fold(ctx context.Context, limit int) error {
	ctx = context.WithoutCancel(ctx)
	var n int
	err := e.db.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = e.foldIn(ctx, tx, limit)
		return err
	})
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	if limit == 0 || n < limit {
		e.unfolded, e.sealed = 0, false
	} else {
		e.unfolded = max(e.unfolded-n, 1)
	}
	return nil
}

// foldWhileIdle folds one chunk when the engine has been idle for foldIdle, and goes on
// with the next chunk (unless an event comes) until the log is empty.
func (e *Engine) foldWhileIdle(ctx context.Context) error {
	if err := e.fold(ctx, foldChunk); err != nil {
		return err
	}
	if e.unfolded > 0 {
		e.foldTimer.Reset(0)
	}
	return nil
}

// afterFlush arms the idle fold after a batch, or folds a chunk now when foldBound records
// wait.
func (e *Engine) afterFlush(ctx context.Context) error {
	if e.unfolded >= foldBound {
		return e.fold(ctx, foldChunk)
	}
	switch {
	case e.unfolded > 0 && e.sealed:
		// A sealed run's rows go to the tables soon: nothing writes it again, and what other
		// processes read of its tables (retention) is then up to date.
		e.foldTimer.Reset(0)
	case e.unfolded > 0:
		e.foldTimer.Reset(e.foldIdle)
	}
	return nil
}

// dropMissingRuns removes the changes of runs q has no row of: a purged run's attempts are
// never inserted again. (Its task updates would match no row anyway.)
func (c *rowChanges) dropMissingRuns(ctx context.Context, q querier) error {
	exists := map[string]bool{}
	for i := range c.inserted {
		run := c.inserted[i].runID
		if _, seen := exists[run]; seen {
			continue
		}
		var one int
		err := q.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = ?`, run).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("fold the row log: %w", err)
		}
		exists[run] = err == nil
	}
	kept := c.inserted[:0]
	for _, a := range c.inserted {
		if exists[a.runID] {
			kept = append(kept, a)
		} else {
			delete(c.insAt, a.dispatchID)
		}
	}
	clear(c.inserted[len(kept):])
	c.inserted = kept
	for i := range c.inserted {
		c.insAt[c.inserted[i].dispatchID] = i
	}
	return nil
}
