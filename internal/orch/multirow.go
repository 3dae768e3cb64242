package orch

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// A commit writes a layer's rows (a hundred task updates, attempt inserts and attempt ends)
// as statements of many rows each instead of one statement per row: a statement's fixed
// cost (database/sql's call, the driver's binding setup, SQLite opening its cursors and
// seeking from the root) is then paid once per chunk. The statements are prepared once per
// chunk size (compiling a long VALUES list in every commit costs more than it saves): a
// batch of n rows runs n/bigChunk statements of bigChunk rows, then of smallChunk rows, then
// one-row statements for the rest. Measured:
// docs/benchmarks-history.md#28-orchestrator-session-6.
const (
	bigChunk   = 32
	smallChunk = 8
)

// chunked holds one row-writing statement prepared for one row, smallChunk and bigChunk rows.
type chunked struct {
	one, small, big *sql.Stmt
	// width is how many arguments one row binds; key the positions, within a row's
	// arguments, of the key an UPDATE ... FROM (VALUES ...) joins on (nil for an INSERT,
	// whose primary key already refuses a row twice).
	width int
	key   []int
	// seen holds the keys one writeChunked call has written so far: a key twice anywhere in
	// one batch (in one chunk, or in two chunks or single rows, where the later row would win
	// silently) fails the commit. Cleared after each call, it keeps its buckets.
	seen map[rowKey]struct{}
}

// rowKey is a row's key: a task's run id and position, or an attempt's dispatch id (n 0).
type rowKey struct {
	s string
	n int
}

// chunkSQL is a statement over n rows: head, then n copies of row joined by commas, then tail.
func chunkSQL(head, row, tail string, n int) string {
	var sb strings.Builder
	sb.WriteString(head)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(row)
	}
	sb.WriteString(tail)
	return sb.String()
}

// The multi-row forms of sqlUpdateTask, sqlInsertTask, sqlInsertAttempt and sqlEndAttempt, each row's
// arguments in the one-row statement's order (so one args function serves both). An UPDATE ...
// FROM (VALUES ...) joins each row of the list to the row it names by its primary key
// (the plan: SCAN v, SEARCH tasks USING PRIMARY KEY); a key twice in one list would update
// its row with either, so a list never holds one key twice: a batch writes a task's row
// once (its dirty flag) and ends an attempt once (complete removes it from live first).
// writeChunked checks it (sameKey): a batch that names a key twice, in one chunk or across
// chunks, fails the commit rather than leave SQLite to pick one of the two rows.
var (
	updateTaskChunk = [3]string{
		`UPDATE tasks SET state = v.column1, attempts = v.column2, failures = v.column3, dispatch_id = v.column4,
		ready_seq = v.column5, retry_at = v.column6, reason = v.column7, detail = v.column8, question = v.column9,
		answer = v.column10, cancel = v.column11, review = v.column12 FROM (VALUES `,
		`(?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		`) AS v WHERE tasks.run_id = v.column13 AND tasks.idx = v.column14`,
	}
	insertTaskChunk = [3]string{
		`INSERT INTO tasks(run_id, idx, id, state, attempts, failures, dispatch_id, ready_seq, retry_at, reason, detail, question, answer, cancel) VALUES `,
		`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		``,
	}
	insertAttemptChunk = [3]string{
		`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, parent_id, inputs, fired_at) VALUES `,
		`(?, ?, ?, ?, 'live', ?, ?, ?)`,
		``,
	}
	insertAttemptWholeChunk = [3]string{
		`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, reason, parent_id, inputs, fired_at, ended_at, usage, verdict) VALUES `,
		`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		``,
	}
	endAttemptChunk = [3]string{
		`UPDATE attempts SET state = v.column1, reason = v.column2, ended_at = v.column3, usage = v.column4,
		verdict = v.column5 FROM (VALUES `,
		`(?,?,?,?,?,?)`,
		`) AS v WHERE attempts.dispatch_id = v.column6`,
	}
)

// The plain forms of updateTaskChunk, insertTaskChunk and insertAttemptWholeChunk, for the
// rows whose optional columns hold their defaults (” and 0: no retry, reason, detail,
// question, answer, cancel or review; no reason, parent, usage or verdict), written as
// literals: such a row, the common one, binds half the arguments, and database/sql converts
// (and the driver binds) every argument of every row on each call. The rows stored are the
// same. A batch's rows go to the plain or the full form, never both (splitPlain), so a key
// is still checked once per batch (the fold's rows are one per key by construction).
var (
	updateTaskPlainChunk = [3]string{
		`UPDATE tasks SET state = v.column1, attempts = v.column2, failures = v.column3, dispatch_id = v.column4,
		ready_seq = v.column5, retry_at = '', reason = '', detail = '', question = '', answer = '', cancel = 0,
		review = '' FROM (VALUES `,
		`(?,?,?,?,?,?,?)`,
		`) AS v WHERE tasks.run_id = v.column6 AND tasks.idx = v.column7`,
	}
	insertTaskPlainChunk = [3]string{
		insertTaskChunk[0],
		`(?, ?, ?, ?, 0, 0, '', ?, '', '', '', '', '', 0)`,
		``,
	}
	insertAttemptWholePlainChunk = [3]string{
		insertAttemptWholeChunk[0],
		`(?, ?, ?, ?, ?, '', '', ?, ?, ?, '', '')`,
		``,
	}
)

// The key positions of the UPDATE ... FROM (VALUES ...) forms: a task's run id and position
// (column13, column14; the plain form's column6, column7); an attempt's dispatch id (column6).
var (
	updateTaskKey      = []int{12, 13}
	updateTaskPlainKey = []int{5, 6}
	endAttemptKey      = []int{5}
)

// splitPlain puts in dst (its room reused) the places of the rows [0, n) for which plain
// holds, then those of the others, each in order, and returns it with how many are plain.
func splitPlain(dst []int32, n int, plain func(i int) bool) ([]int32, int) {
	dst = dst[:0]
	for i := range n {
		if plain(i) {
			dst = append(dst, int32(i))
		}
	}
	k := len(dst)
	for i := range n {
		if !plain(i) {
			dst = append(dst, int32(i))
		}
	}
	return dst, k
}

// prepareChunked compiles the small and big forms of q on db; one is the one-row statement,
// key the positions of the key its rows join on (nil: an INSERT).
func prepareChunked(ctx context.Context, db *sql.DB, one *sql.Stmt, q [3]string, key []int) (chunked, error) {
	c := chunked{one: one, width: strings.Count(q[1], "?"), key: key}
	var err error
	if c.small, err = db.PrepareContext(ctx, chunkSQL(q[0], q[1], q[2], smallChunk)); err != nil {
		return c, err
	}
	if c.big, err = db.PrepareContext(ctx, chunkSQL(q[0], q[1], q[2], bigChunk)); err != nil {
		c.small.Close()
		return c, err
	}
	return c, nil
}

func (c *chunked) close() error {
	var err error
	for _, s := range []*sql.Stmt{c.small, c.big} {
		if s != nil {
			if e := s.Close(); e != nil && err == nil {
				err = e
			}
		}
	}
	*c = chunked{}
	return err
}

// writeChunked writes n rows with c in tx. args appends row i's arguments (in the one-row
// statement's order) to dst and returns it; buf is reused across calls.
func writeChunked(ctx context.Context, tx *sql.Tx, c *chunked, n int, buf *[]any, args func(dst []any, i int) []any) error {
	var big, small, one *sql.Stmt
	i := 0
	for i < n {
		var stmt *sql.Stmt
		k := 1
		switch {
		case n-i >= bigChunk:
			if big == nil {
				big = tx.StmtContext(ctx, c.big)
			}
			stmt, k = big, bigChunk
		case n-i >= smallChunk:
			if small == nil {
				small = tx.StmtContext(ctx, c.small)
			}
			stmt, k = small, smallChunk
		default:
			if one == nil {
				one = tx.StmtContext(ctx, c.one)
			}
			stmt = one
		}
		a := (*buf)[:0]
		for j := i; j < i+k; j++ {
			a = args(a, j)
		}
		*buf = a
		if n > 1 {
			if err := c.sameKey(a, k, i); err != nil {
				clear(*buf)
				clear(c.seen)
				return err
			}
		}
		if _, err := stmt.ExecContext(ctx, a...); err != nil {
			clear(c.seen)
			return err
		}
		i += k
	}
	clear(*buf)
	clear(c.seen)
	return nil
}

// sameKey fails when one of the k rows whose arguments a holds (the batch's rows from first)
// names a key an earlier row of this writeChunked call named: in an UPDATE ... FROM (VALUES
// ...) SQLite would update that row from either of them, and across two statements the later
// would win; either way the row would not be the one the batch's audit entries record.
func (c *chunked) sameKey(a []any, k, first int) error {
	if len(c.key) == 0 {
		return nil
	}
	if len(a) != k*c.width {
		return fmt.Errorf("orchestrator: a chunk of %d rows bound %d arguments, want %d", k, len(a), k*c.width)
	}
	if c.seen == nil {
		c.seen = map[rowKey]struct{}{}
	}
	for x := 0; x < k; x++ {
		var key rowKey
		var ok bool
		if key.s, ok = a[x*c.width+c.key[0]].(string); !ok {
			return fmt.Errorf("orchestrator: row %d's key %v is not a string", first+x, a[x*c.width+c.key[0]])
		}
		if len(c.key) > 1 {
			if key.n, ok = a[x*c.width+c.key[1]].(int); !ok {
				return fmt.Errorf("orchestrator: row %d's key %v is not an int", first+x, a[x*c.width+c.key[1]])
			}
		}
		if _, dup := c.seen[key]; dup {
			return fmt.Errorf("orchestrator: row %d of one batch's multi-row write names the same key %v as an earlier row: refused (SQLite would update it from either)", first+x, a[x*c.width+c.key[0]:x*c.width+c.key[len(c.key)-1]+1])
		}
		c.seen[key] = struct{}{}
	}
	return nil
}
