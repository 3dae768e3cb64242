package orch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/verdict"
)

// Reader answers views of the runs (the web run view) from orch.db in bounded pieces: a run
// without its tasks, its counts and usage, a page of its tasks, one task, the tasks in one
// state. Unlike [Engine.Status], which reads every task of a run (and parses its plan), each
// answer costs what it returns (or one indexed scan of one run's rows), so a view of a
// 100,000-task run is as cheap as any other. It never touches the engine: the db SHOULD be a
// read-only connection of its own ([store.OpenReadOnly]), so a reader never holds a
// connection the engine needs, and WAL readers never block the engine's commits.
type Reader struct{ db *sql.DB }

// NewReader returns a Reader of orch.db through db.
func NewReader(db *sql.DB) *Reader { return &Reader{db: db} }

// TaskRow is a task as the tasks table holds it, with its position in the plan.
type TaskRow struct {
	Index int
	api.Task
}

// Runs lists up to limit runs, newest first, without counts, usage or tasks.
func (r *Reader) Runs(ctx context.Context, limit int) ([]api.Run, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT `+runColumns+` FROM runs ORDER BY created_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	out := []api.Run{}
	for rows.Next() {
		run, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, run)
	}
	return out, rows.Err()
}

// Run returns run ref (an id, or a name: its newest run) without counts, usage or tasks.
func (r *Reader) Run(ctx context.Context, ref string) (api.Run, error) {
	run, err := scanRun(r.db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ? OR name = ?
		ORDER BY id = ? DESC, created_at DESC, id DESC LIMIT 1`, ref, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return api.Run{}, runNotFound(ctx, r.db, ref)
	}
	return run, err
}

// RunShape is the outline of every task of a run, in the order of their positions, and why
// each task after the plan's was added.
type RunShape struct {
	Tasks []plan.Outline
	// Added[i] is why Tasks[len(Tasks)-len(Added)+i] was added (as [Engine.Status] says).
	Added []api.Added
}

// Shape returns the outline of every task of run id, in the order of its tasks' positions:
// its plan's ([plan.ReadOutline], without parsing the plan whole), then those its
// extensions added (fan-out items, reviewers, fixes: the plan is then parsed, and the
// extensions derived as the engine derives them), with why each was added.
func (r *Reader) Shape(ctx context.Context, id string) (RunShape, error) {
	var canonical []byte
	if err := r.db.QueryRowContext(ctx, `SELECT plan FROM run_plans WHERE run_id = ?`, id).Scan(&canonical); err != nil {
		return RunShape{}, fmt.Errorf("run %s: read its plan: %w", id, err)
	}
	var n int
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM run_extensions WHERE run_id = ?`, id).Scan(&n); err != nil {
		return RunShape{}, fmt.Errorf("run %s: read its extensions: %w", id, err)
	}
	if n == 0 {
		o, err := plan.ReadOutline(canonical)
		return RunShape{Tasks: o}, err
	}
	p, err := plan.Parse("orch.db run "+id, canonical)
	if err != nil {
		return RunShape{}, fmt.Errorf("run %s: stored plan: %w", id, err)
	}
	specs, added, err := extendedSpecs(ctx, r.db, id, p.Resolve())
	if err != nil {
		return RunShape{}, err
	}
	return RunShape{Tasks: plan.OutlineOf(specs), Added: added}, nil
}

// Counts returns how many of run id's tasks are in each state, and how many it has.
func (r *Reader) Counts(ctx context.Context, id string) (map[string]int, int, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT state, COUNT(*) FROM tasks WHERE run_id = ? GROUP BY state`, id)
	if err != nil {
		return nil, 0, fmt.Errorf("run %s: count its tasks: %w", id, err)
	}
	defer rows.Close()
	counts, total := map[string]int{}, 0
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, 0, err
		}
		counts[s], total = n, total+n
	}
	return counts, total, rows.Err()
}

// Usage is what run id's ended attempts used together, summed in the database (as
// [Engine.Status] sums it), nil when nothing was used.
func (r *Reader) Usage(ctx context.Context, id string) (*budget.Usage, error) {
	var u budget.Usage
	var in, out, cached, calls sql.NullInt64
	var cost sql.NullFloat64
	err := r.db.QueryRowContext(ctx, `SELECT SUM(json_extract(usage, '$.input_tokens')), SUM(json_extract(usage, '$.output_tokens')),
		SUM(json_extract(usage, '$.cached_tokens')), SUM(json_extract(usage, '$.model_calls')), SUM(json_extract(usage, '$.cost_usd'))
		FROM attempts WHERE run_id = ? AND usage != ''`, id).Scan(&in, &out, &cached, &calls, &cost)
	if err != nil {
		return nil, fmt.Errorf("run %s: sum its usage: %w", id, err)
	}
	u = budget.Usage{InputTokens: in.Int64, OutputTokens: out.Int64, CachedTokens: cached.Int64, ModelCalls: calls.Int64,
		CostUSD: math.Round(cost.Float64*1e9) / 1e9}
	if u.IsZero() {
		return nil, nil
	}
	return &u, nil
}

// taskRowFrom reads a task with its latest attempt's verdict (as Status shows it); queries
// name the task's columns t.* .
const taskRowFrom = `SELECT t.idx, t.id, t.state, t.attempts, t.dispatch_id, t.reason, t.detail, t.question, t.retry_at, t.review,
	COALESCE(a.verdict, '') FROM tasks t LEFT JOIN attempts a ON a.dispatch_id = t.dispatch_id AND t.dispatch_id != '' `

func scanTaskRow(s rowScanner) (TaskRow, error) {
	var t TaskRow
	var retryAt, review, vj string
	if err := s.Scan(&t.Index, &t.ID, &t.State, &t.Attempts, &t.DispatchID, &t.Reason, &t.Detail, &t.Question, &retryAt, &review, &vj); err != nil {
		return t, err
	}
	if retryAt != "" {
		if at, err := time.Parse(time.RFC3339Nano, retryAt); err == nil {
			t.RetryAt = &at
		}
	}
	if review != "" {
		rv, err := decodeStoredReview(review)
		if err != nil {
			return t, fmt.Errorf("task %s: %w", t.ID, err)
		}
		t.Review = rv
	}
	if vj != "" {
		v, err := verdict.Parse([]byte(vj))
		if err != nil {
			return t, fmt.Errorf("task %s: its verdict: %w", t.ID, err)
		}
		t.Verdict = &v
	}
	return t, nil
}

func (r *Reader) taskRows(ctx context.Context, query string, args ...any) ([]TaskRow, error) {
	rows, err := r.db.QueryContext(ctx, taskRowFrom+query, args...)
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	defer rows.Close()
	out := []TaskRow{}
	for rows.Next() {
		t, err := scanTaskRow(rows)
		if err != nil {
			return nil, fmt.Errorf("read tasks: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Tasks returns up to limit of run id's tasks from plan position from on, in plan order.
func (r *Reader) Tasks(ctx context.Context, id string, from, limit int) ([]TaskRow, error) {
	return r.taskRows(ctx, `WHERE t.run_id = ? AND t.idx >= ? ORDER BY t.idx LIMIT ?`, id, from, limit)
}

// TasksAt returns run id's tasks at the plan positions idx (those that exist), in plan order.
func (r *Reader) TasksAt(ctx context.Context, id string, idx []int) ([]TaskRow, error) {
	if len(idx) == 0 {
		return []TaskRow{}, nil
	}
	args := []any{id}
	for _, i := range idx {
		args = append(args, i)
	}
	return r.taskRows(ctx, `WHERE t.run_id = ? AND t.idx IN (`+placeholders(len(idx))+`) ORDER BY t.idx`, args...)
}

// TasksNamed returns run id's tasks named ids (those that exist), in plan order: one scan
// of the run's rows.
func (r *Reader) TasksNamed(ctx context.Context, id string, ids []string) ([]TaskRow, error) {
	if len(ids) == 0 {
		return []TaskRow{}, nil
	}
	args := []any{id}
	for _, t := range ids {
		args = append(args, t)
	}
	return r.taskRows(ctx, `WHERE t.run_id = ? AND t.id IN (`+placeholders(len(ids))+`) ORDER BY t.idx`, args...)
}

// TasksIn returns up to limit of run id's tasks in state, in plan order.
func (r *Reader) TasksIn(ctx context.Context, id, state string, limit int) ([]TaskRow, error) {
	return r.taskRows(ctx, `WHERE t.run_id = ? AND t.state = ? ORDER BY t.idx LIMIT ?`, id, state, limit)
}

// Task returns run id's task taskID, with why the run added it and, for a task that
// succeeded with a fix of its work, the fix's dispatch (as [Engine.Status] says both).
func (r *Reader) Task(ctx context.Context, id, taskID string) (TaskRow, error) {
	t, err := scanTaskRow(r.db.QueryRowContext(ctx, taskRowFrom+`WHERE t.run_id = ? AND t.id = ?`, id, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return t, &errclass.NotFoundError{Kind: "task", ID: taskID, In: "run " + id, Of: ErrNotFound}
	}
	if err != nil {
		return t, err
	}
	return t, r.extensionOf(ctx, id, &t)
}

// extensionOf sets t.Added and t.Product from run id's extension rows: the row whose tasks
// hold t's position added it (the engine writes each row with the positions of its tasks),
// and the newest fix of t that succeeded is its product when t succeeded ([setProducts]).
// Each is one scan of the run's extension rows, without their data.
func (r *Reader) extensionOf(ctx context.Context, id string, t *TaskRow) error {
	var a api.Added
	err := r.db.QueryRowContext(ctx, `SELECT cause, task FROM run_extensions WHERE run_id = ? AND first <= ? AND ? < first + count`,
		id, t.Index, t.Index).Scan(&a.Cause, &a.Task)
	switch {
	case err == nil:
		t.Added = &a
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("task %s: read its extension: %w", t.ID, err)
	}
	if t.State != api.TaskSucceeded {
		return nil
	}
	err = r.db.QueryRowContext(ctx, `SELECT f.dispatch_id FROM run_extensions x JOIN tasks f ON f.run_id = x.run_id AND f.idx = x.first
		WHERE x.run_id = ? AND x.cause = ? AND x.task = ? AND f.state = ? ORDER BY x.seq DESC LIMIT 1`,
		id, causeFix, t.ID, api.TaskSucceeded).Scan(&t.Product)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("task %s: read its product: %w", t.ID, err)
	}
	return nil
}

// Attempts returns the dispatch ids of every attempt of run id's task at plan position idx,
// oldest first.
func (r *Reader) Attempts(ctx context.Context, id string, idx int) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT dispatch_id FROM attempts WHERE run_id = ? AND task_idx = ? ORDER BY number`, id, idx)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// AttemptsIn returns the dispatch ids of every attempt of run id's tasks at plan positions
// from to to (inclusive), by position, oldest first: one range of the attempts index.
func (r *Reader) AttemptsIn(ctx context.Context, id string, from, to int) (map[int][]string, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT task_idx, dispatch_id FROM attempts WHERE run_id = ? AND task_idx BETWEEN ? AND ? ORDER BY task_idx, number`, id, from, to)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	defer rows.Close()
	out := map[int][]string{}
	for rows.Next() {
		var idx int
		var d string
		if err := rows.Scan(&idx, &d); err != nil {
			return nil, err
		}
		out[idx] = append(out[idx], d)
	}
	return out, rows.Err()
}

// AttemptRuns returns, of the dispatch ids given, those that are attempts of a run, with the
// run's id. Each is one lookup by the attempts table's key.
func (r *Reader) AttemptRuns(ctx context.Context, dispatchIDs []string) (map[string]string, error) {
	out := map[string]string{}
	for len(dispatchIDs) > 0 {
		n := min(len(dispatchIDs), 500)
		args := make([]any, n)
		for i, d := range dispatchIDs[:n] {
			args[i] = d
		}
		rows, err := r.db.QueryContext(ctx, `SELECT dispatch_id, run_id FROM attempts WHERE dispatch_id IN (`+placeholders(n)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("find attempts: %w", err)
		}
		for rows.Next() {
			var d, run string
			if err := rows.Scan(&d, &run); err != nil {
				rows.Close()
				return nil, err
			}
			out[d] = run
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		dispatchIDs = dispatchIDs[n:]
	}
	return out, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// TaskAttempts is one task of a run with every attempt's dispatch id, oldest first.
type TaskAttempts struct {
	ID         string
	Dispatches []string
}

// AllAttempts returns every task of run id, in plan order, with its attempts: what a run
// bundle binds (two scans of the run's rows, no plan read).
func (r *Reader) AllAttempts(ctx context.Context, id string) ([]TaskAttempts, error) {
	rows, err := r.Tasks(ctx, id, 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	out := make([]TaskAttempts, len(rows))
	at := make(map[int]int, len(rows))
	for i, t := range rows {
		out[i].ID, at[t.Index] = t.ID, i
	}
	arows, err := r.db.QueryContext(ctx, `SELECT task_idx, dispatch_id FROM attempts WHERE run_id = ? ORDER BY task_idx, number`, id)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	defer arows.Close()
	for arows.Next() {
		var idx int
		var d string
		if err := arows.Scan(&idx, &d); err != nil {
			return nil, err
		}
		if i, ok := at[idx]; ok {
			out[i].Dispatches = append(out[i].Dispatches, d)
		}
	}
	return out, arows.Err()
}
