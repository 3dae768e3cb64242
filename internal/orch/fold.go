package orch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/rowlog"
)

// The fold brings the tasks and attempts tables up to date from row_log (rowlog.go) and
// deletes the records it applied, in one transaction: a fold killed halfway leaves every
// record in the log and the tables as they were. It runs on the engine's goroutine, never
// beside a commit (SQLite has one writer): inside a commit's own transaction, foldStep
// records at a time, while foldBound records wait; in a transaction of its own when the
// engine has been idle for foldIdle, at once (a chunk at a time, events first) after a batch
// that sealed a run, at Open (before the runs are loaded) and when Run returns. The rows of a
// run that no longer exists (a sealed run internal/retention purged while a crash left its
// records unfolded) are not written back.
//
// A record holds one commit's rows: a few hundred when tasks fire and end, but up to a
// cascade's 2,048 skips (cascade.go) or unskips, each with its reason. So the log is bounded
// in rows too (foldRows), else a reader's overlay could hold every task of a 100,000-task run:
// tens of MB, and a read of every record, for each status or page read.
//
// A fold reads the record after those it applies too (foldAhead): a task whose row that
// record writes again, and an attempt it ends, is written once, as the later record leaves
// it (dropSuperseded, preApply). A task fired in one record and ended in the next has its
// rows written once however the records fall into folds, so folding a few records in every
// commit costs what folding many at once does, and no commit waits for a long fold.
const (
	// foldIdle is how long the engine waits without an event before it folds.
	foldIdle = 50 * time.Millisecond
	// foldChunk is how many records one fold transaction of its own applies at most while
	// the engine runs: a fold of a few thousand rows, so an event waits at most one chunk.
	foldChunk = 64
	// foldBound is how many records may wait: a busy engine that is never idle folds the
	// oldest in every commit past it, so a reader's overlay (overlay.go) stays bounded.
	foldBound = 256
	// foldRows is how many rows the waiting records may change (task updates, attempts fired
	// and ended, counted as written): past it, too, every commit folds the oldest records.
	// It is about 48 records of a busy run's commits (about 340 rows each), and keeps a
	// reader's overlay to a few MB (ADR 0030).
	foldRows = 1 << 14
	// foldStep is how many records a commit past foldBound or foldRows folds at least: more
	// than the one it writes, so the log shrinks back under the bound (past foldRows, as
	// many more as that takes: foldCount).
	foldStep = 2
	// foldAhead is how many records after those a fold applies it reads ahead
	// (dropSuperseded, preApply).
	foldAhead = 1
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
	// What the record after the last one read holds (readLog's ahead): the tasks it writes
	// (dropSuperseded) and its ends (preApply), never applied.
	aheadTasks map[taskKey]struct{}
	aheadEnds  map[string]endImage
	dec        rowlog.Reader // the records' decoder, its lists and values reused
}

func newRowChanges() *rowChanges {
	return &rowChanges{taskAt: map[taskKey]int{}, insAt: map[string]int{}, ends: map[string]endImage{},
		aheadTasks: map[taskKey]struct{}{}, aheadEnds: map[string]endImage{}}
}

// reset empties c for the next fold, keeping its room.
func (c *rowChanges) reset() {
	clear(c.taskAt)
	clear(c.insAt)
	clear(c.ends)
	clear(c.tasks)
	clear(c.inserted)
	clear(c.endOrder)
	clear(c.aheadTasks)
	clear(c.aheadEnds)
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
// it returns the last record's seq (0 for none) and how many it read. With a limit, it also
// reads which tasks the ahead records after them write and the attempts they end
// (c.aheadTasks, c.aheadEnds), and applies nothing of them.
// A record that does not decode is an error naming it: a damaged orch.db is never skipped.
func readLog(ctx context.Context, q querier, limit, ahead int, c *rowChanges) (last int64, n int, err error) {
	query := `SELECT seq, record FROM row_log ORDER BY seq`
	if limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", limit+ahead)
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return 0, 0, fmt.Errorf("read orch.db's row log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		// The record is decoded before the next Scan: sql.RawBytes lends the driver's copy
		// of it instead of making one more.
		var seq int64
		var b sql.RawBytes
		if err := rows.Scan(&seq, &b); err != nil {
			return 0, 0, fmt.Errorf("read orch.db's row log: %w", err)
		}
		rec, err := c.dec.Decode(b)
		if err == nil && limit > 0 && n == limit {
			for i := range rec.Tasks {
				c.aheadTasks[taskKey{rec.Tasks[i].RunID, rec.Tasks[i].Idx}] = struct{}{}
			}
			for i := range rec.Ends {
				x := endFromWire(&rec.Ends[i])
				c.aheadEnds[x.id] = x
			}
			continue
		}
		if err == nil {
			err = c.add(rec)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("orch.db row log record %d: %w", seq, err)
		}
		last = seq
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
	last, n, err := readLog(ctx, tx, limit, foldAhead, c)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := c.dropMissingRuns(ctx, tx); err != nil {
		return 0, err
	}
	c.dropSuperseded()
	c.preApply(e.preApplied)
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
		e.foldedRows(-1)
	} else {
		e.unfolded = max(e.unfolded-n, 1)
		e.foldedRows(n)
	}
	return nil
}

// foldCount is how many of the oldest records a commit past a bound folds: foldStep, and
// past foldRows as many more as bring the rows waiting back under it. Records differ in size
// (a few rows, or a cascade's 2,048), so a fixed count would let a cascade's records pile up
// behind small ones.
func (e *Engine) foldCount() int {
	n, rows := 0, e.unfoldedRows
	for n < len(e.logRows) && (n < foldStep || rows > e.foldRows) {
		rows -= e.logRows[n]
		n++
	}
	return max(n, foldStep)
}

// loggedRows notes that the commit wrote a record changing rows rows.
func (e *Engine) loggedRows(rows int) {
	e.logRows = append(e.logRows, rows)
	e.unfoldedRows += rows
}

// foldedRows notes that the oldest n records were folded; -1: every one was.
func (e *Engine) foldedRows(n int) {
	if n < 0 || n >= len(e.logRows) {
		e.logRows, e.unfoldedRows = e.logRows[:0], 0
		return
	}
	for _, r := range e.logRows[:n] {
		e.unfoldedRows -= r
	}
	// Shift down rather than reslice, so the queue's room is reused.
	e.logRows = e.logRows[:copy(e.logRows, e.logRows[n:])]
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

// afterFlush arms the fold after a batch: at once when it sealed a run, after foldIdle
// otherwise (past foldBound the next commit folds too).
func (e *Engine) afterFlush(ctx context.Context) error {
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

// dropSuperseded removes the task images the record after these (aheadTasks) writes again:
// that record holds the task's whole row as it stands later, and the row takes that image
// when the record is folded. Until then every reader applies it over the table's (overlay.go;
// reader.go counts what a row changes from the table's state), so the row may hold an older
// image meanwhile, and a fold of it after a crash writes it then.
func (c *rowChanges) dropSuperseded() {
	if len(c.aheadTasks) == 0 {
		return
	}
	kept := c.tasks[:0]
	for _, t := range c.tasks {
		if _, later := c.aheadTasks[taskKey{t.runID, t.idx}]; !later {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(c.tasks) {
		return
	}
	clear(c.tasks[len(kept):])
	c.tasks = kept
	clear(c.taskAt)
	for i := range c.tasks {
		c.taskAt[taskKey{c.tasks[i].runID, c.tasks[i].idx}] = i
	}
}

// preApply writes into each attempt these records fire and leave live its end from the
// record after them (aheadEnds), noting it in applied, and drops the ends of attempts noted
// there by an earlier fold: an attempt fired in one record and ended in the next has its row
// written once, ended, not inserted live and then updated, however the records fall into
// folds. The end's own record keeps the end until it is folded; every reader applies it over
// the table's row, which then holds the same values (overlay.go), and a fold of it after a
// crash (at Open, with nothing noted) writes them again, which changes nothing.
func (c *rowChanges) preApply(applied map[string]struct{}) {
	if len(applied) > 0 {
		kept := c.endOrder[:0]
		for _, id := range c.endOrder {
			if _, ok := applied[id]; ok {
				delete(applied, id)
				delete(c.ends, id)
				continue
			}
			kept = append(kept, id)
		}
		clear(c.endOrder[len(kept):])
		c.endOrder = kept
	}
	for i := range c.inserted {
		a := &c.inserted[i]
		x, ok := c.aheadEnds[a.dispatchID]
		if !ok || a.state != lifecycle.AttemptLive {
			continue
		}
		a.state, a.reason, a.endedAt, a.usage, a.verdict = x.state, x.reason, x.endedAt, x.usage, x.verdict
		applied[a.dispatchID] = struct{}{}
	}
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
