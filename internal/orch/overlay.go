package orch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
)

// Every reader of the task and attempt rows reads the tables and the row log's records not
// yet folded (rowlog.go, fold.go) in one read transaction, and applies the records in
// memory: an overlay of the rows they changed, whole. Readers include read-only connections
// (store.OpenReadOnly: the web view, bundles, `agora orch status` after a crash, when
// nothing has folded the log), which can never fold it themselves.

// overlay is what the unfolded records make of the rows: each task row they updated and
// each attempt row they inserted or ended, whole; runs names the runs it touches.
type overlay struct {
	tasks    map[taskKey]taskImage
	attempts map[string]attemptImage
	runs     map[string]bool
}

// touches says whether the overlay changes any row of run id (a nil overlay changes none).
func (ov *overlay) touches(id string) bool { return ov != nil && ov.runs[id] }

// task returns run id's task at idx as the records left it.
func (ov *overlay) task(id string, idx int) (taskImage, bool) {
	if ov == nil {
		return taskImage{}, false
	}
	t, ok := ov.tasks[taskKey{id, idx}]
	return t, ok
}

// attempt returns attempt id as the records left it.
func (ov *overlay) attempt(id string) (attemptImage, bool) {
	if ov == nil {
		return attemptImage{}, false
	}
	a, ok := ov.attempts[id]
	return a, ok
}

// attemptsOf returns the overlay's attempts of run id, by task position then number.
func (ov *overlay) attemptsOf(id string) []attemptImage {
	if !ov.touches(id) {
		return nil
	}
	var out []attemptImage
	for _, a := range ov.attempts {
		if a.runID == id {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b attemptImage) int {
		if a.taskIdx != b.taskIdx {
			return a.taskIdx - b.taskIdx
		}
		return a.number - b.number
	})
	return out
}

// readOverlay reads every unfolded record in q (a read transaction) and makes the overlay of
// the rows they changed, nil when the log is empty. An attempt ended in the records but fired
// before them is read from its table row, then ended.
func readOverlay(ctx context.Context, q querier) (*overlay, error) {
	c := newRowChanges()
	if _, n, err := readLog(ctx, q, 0, 0, c); err != nil || n == 0 {
		return nil, err
	}
	ov := &overlay{tasks: make(map[taskKey]taskImage, len(c.tasks)), attempts: make(map[string]attemptImage, len(c.inserted)+len(c.ends)),
		runs: map[string]bool{}}
	for _, t := range c.tasks {
		ov.tasks[taskKey{t.runID, t.idx}] = t
		ov.runs[t.runID] = true
	}
	for _, a := range c.inserted {
		ov.attempts[a.dispatchID] = a
		ov.runs[a.runID] = true
	}
	for _, id := range c.endOrder {
		x := c.ends[id]
		a := attemptImage{dispatchID: id}
		err := q.QueryRowContext(ctx, `SELECT run_id, task_idx, number, parent_id, inputs, fired_at FROM attempts WHERE dispatch_id = ?`, id).
			Scan(&a.runID, &a.taskIdx, &a.number, &a.parentID, &a.inputs, &a.firedAt)
		if errors.Is(err, sql.ErrNoRows) {
			continue // as the UPDATE the record stands for: no row, nothing ended
		}
		if err != nil {
			return nil, fmt.Errorf("read the attempt %s the row log ends: %w", id, err)
		}
		a.state, a.reason, a.endedAt, a.usage, a.verdict = x.state, x.reason, x.endedAt, x.usage, x.verdict
		ov.attempts[id] = a
		ov.runs[a.runID] = true
	}
	return ov, nil
}

// readTx runs fn in one read transaction of db, with the overlay of the records not yet
// folded. The transaction is begun DEFERRED on a connection of its own: a read never takes
// the write lock (orch.db's writable pool begins its transactions IMMEDIATE).
func readTx(ctx context.Context, db *sql.DB, fn func(q querier, ov *overlay) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("read orch.db: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return fmt.Errorf("read orch.db: begin: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
	ov, err := readOverlay(ctx, conn)
	if err != nil {
		return err
	}
	return fn(conn, ov)
}
