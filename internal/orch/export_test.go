package orch

import (
	"context"
	"database/sql"
	"reflect"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/orch/api"

	"github.com/agora-dev/agora/internal/orch/reviewwire"
	"github.com/agora-dev/agora/internal/orch/rowlog"
)

// SetDrain bounds how many queued events one batch takes (maxBatch otherwise), for the
// benchmarks that measure what smaller batches do to dependency-to-fire latency. Call it
// before Run.
func SetDrain(e *Engine, n int) { e.drain = n }

// RowsSnapshot is a run's task and attempt rows and its audit entries' counts as one read
// transaction sees them, the row log's unfolded records applied (overlay.go).
type RowsSnapshot struct {
	Unfolded int               // records not yet folded
	Tasks    map[int]TaskState // by position
	Attempts map[string]AttemptState
	Fired    int // orch.task.fired entries of the run's tasks
	Done     int // orch.task.succeeded entries
}

// TaskState is what the snapshot keeps of a task row.
type TaskState struct {
	ID, State, DispatchID string
	Attempts              int
}

// AttemptState is what the snapshot keeps of an attempt row.
type AttemptState struct {
	TaskIdx, Number                int
	State, EndedAt, Usage, Verdict string
}

// Snapshot reads run id's rows from db in one read transaction, through the overlay.
func Snapshot(ctx context.Context, db *sql.DB, id string, firedKind, doneKind, lo, hi string) (RowsSnapshot, error) {
	s := RowsSnapshot{Tasks: map[int]TaskState{}, Attempts: map[string]AttemptState{}}
	err := readTx(ctx, db, func(q querier, ov *overlay) error {
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM row_log`).Scan(&s.Unfolded); err != nil {
			return err
		}
		rows, err := taskRows(ctx, q, ov, id, `WHERE t.run_id = ? ORDER BY t.idx`, nil, 0, id)
		if err != nil {
			return err
		}
		for _, t := range rows {
			s.Tasks[t.Index] = TaskState{ID: t.ID, State: t.State, DispatchID: t.DispatchID, Attempts: t.Attempts}
		}
		arows, err := q.QueryContext(ctx, `SELECT dispatch_id, task_idx, number, state, ended_at, usage, verdict FROM attempts WHERE run_id = ?`, id)
		if err != nil {
			return err
		}
		defer arows.Close()
		for arows.Next() {
			var d string
			var a AttemptState
			if err := arows.Scan(&d, &a.TaskIdx, &a.Number, &a.State, &a.EndedAt, &a.Usage, &a.Verdict); err != nil {
				return err
			}
			s.Attempts[d] = a
		}
		if err := arows.Err(); err != nil {
			return err
		}
		for _, a := range ov.attemptsOf(id) {
			s.Attempts[a.dispatchID] = AttemptState{TaskIdx: a.taskIdx, Number: a.number, State: a.state, EndedAt: a.endedAt, Usage: a.usage, Verdict: a.verdict}
		}
		count := `SELECT COUNT(*) FROM audit_entries WHERE kind = ? AND subject >= ? AND subject < ?`
		if err := q.QueryRowContext(ctx, count, firedKind, lo, hi).Scan(&s.Fired); err != nil {
			return err
		}
		return q.QueryRowContext(ctx, count, doneKind, lo, hi).Scan(&s.Done)
	})
	return s, err
}

// DecodeLogRecord exposes the row log's decoder to the fuzz target.
func DecodeLogRecord(b []byte) error {
	_, err := decodeLogRecord(b)
	return err
}

// SetInFold sets the hook a fold runs inside its transaction, after its rows are written and
// before its records are deleted (nil: none).
func SetInFold(f func()) { testOnlyInFold = f }

// Queued is how many events wait in the engine's queue: a test that must have its command
// queued before the engine goes on waits for it from an Observer's callback.
func Queued(e *Engine) int { return len(e.in) }

// CascadeBatch is how many tasks one batch skips at most (cascade.go).
const CascadeBatch = cascadeBatch

// SetFoldBound sets how many row log records may wait before every commit folds the oldest
// (foldBound otherwise), for the tests that fold in every commit. Call it before Run.
func SetFoldBound(e *Engine, n int) { e.foldBound = n }

// SetFoldRows sets how many rows the waiting row log records may change before every commit
// folds the oldest (foldRows otherwise). Call it before Run.
func SetFoldRows(e *Engine, n int) { e.foldRows = n }

// LogRows returns how many rows the records waiting in db's row log change, counted as
// written: what foldRows bounds, and what a reader's overlay is made of.
func LogRows(ctx context.Context, db *sql.DB) (int, error) {
	rows, err := db.QueryContext(ctx, `SELECT record FROM row_log`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var dec rowlog.Reader
	n := 0
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return 0, err
		}
		rec, err := dec.Decode(b)
		if err != nil {
			return 0, err
		}
		n += len(rec.Tasks) + len(rec.Inserts) + len(rec.Ends)
	}
	return n, rows.Err()
}

// SetFoldIdle sets how long the engine waits idle before it folds the row log (foldIdle
// otherwise), for the tests that need records left unfolded. Call it before Run.
func SetFoldIdle(e *Engine, d time.Duration) { e.foldIdle = d }

// NoExtWritten says whether the links every task without its own shares were written: a
// write through a task's promoted ext fields instead of own() lands there, in every task.
func NoExtWritten() bool { return !reflect.ValueOf(*noExt).IsZero() }

// NoRareWritten says whether the rare fields every task without its own shares were
// written: a write through a task's promoted rare fields instead of a set method lands
// there, in every task.
func NoRareWritten() bool { return *noRare != (rare{}) }

// Limit is the limit for what is held now.
func (m *Memory) Limit() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.limit()
}

// DecodeReview reads a review object exactly ([reviewwire.Decode]).
func DecodeReview(b []byte) (Review, error) { return reviewwire.Decode(b) }

// StoreSpecAhead adds a task to run id's specs as an extension does before the commit that
// writes its rows (storeSpecs, then the batch's flush): a read between them has a spec its
// snapshot holds no row of.
func StoreSpecAhead(e *Engine, id, task string) {
	v, _ := e.specs.Load(id)
	rs := v.(runSpecs)
	x := *rs.tasks[0]
	x.ID = task
	rs.tasks = append(slices.Clip(rs.tasks), &x)
	rs.added = append(slices.Clip(rs.added), api.Added{Cause: causeReview, Task: rs.tasks[0].ID})
	e.specs.Store(id, rs)
}
