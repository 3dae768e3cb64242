package orch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/lifecycle"
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
func (r *Reader) Counts(ctx context.Context, id string) (counts map[string]int, total int, err error) {
	err = readTx(ctx, r.db, func(q querier, ov *overlay) error {
		counts, total, err = runCounts(ctx, q, ov, id)
		return err
	})
	return counts, total, err
}

// runCounts counts run id's tasks by state in q, as ov leaves them: the counts the triggers
// keep in run_counts with the rows (schema.go), then, for each task row the overlay changes,
// its table state taken off and the overlay's added. It costs the run's few states and the
// overlay's rows of the run, never a scan of the run's tasks.
func runCounts(ctx context.Context, q querier, ov *overlay, id string) (map[string]int, int, error) {
	rows, err := q.QueryContext(ctx, `SELECT state, n FROM run_counts WHERE run_id = ? AND n != 0`, id)
	if err != nil {
		return nil, 0, fmt.Errorf("run %s: count its tasks: %w", id, err)
	}
	defer rows.Close()
	counts, total := map[string]int{}, 0
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, 0, fmt.Errorf("run %s: count its tasks: %w", id, err)
		}
		counts[s], total = counts[s]+n, total+n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("run %s: count its tasks: %w", id, err)
	}
	if !ov.touches(id) {
		return counts, total, nil
	}
	var idx []any
	for k := range ov.tasks {
		if k.run == id {
			idx = append(idx, k.idx)
		}
	}
	// The table's state of each row the overlay changes (an update of a row that is not
	// there changes nothing, as the statement the record stands for).
	err = inChunks(idx, func(part []any) error {
		rows, err := q.QueryContext(ctx, `SELECT idx, state FROM tasks WHERE run_id = ? AND idx IN (`+placeholders(len(part))+`)`,
			append([]any{id}, part...)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var i int
			var s string
			if err := rows.Scan(&i, &s); err != nil {
				return err
			}
			t, _ := ov.task(id, i)
			counts[s]--
			counts[t.state]++
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("run %s: count its tasks: %w", id, err)
	}
	for s, n := range counts {
		if n == 0 {
			delete(counts, s)
		}
	}
	return counts, total, nil
}

// inChunkSize bounds the keys of one IN list (SQLite's bound on a statement's parameters
// is far above it).
const inChunkSize = 500

// inChunks calls fn with keys inChunkSize at a time.
func inChunks(keys []any, fn func([]any) error) error {
	for len(keys) > 0 {
		n := min(len(keys), inChunkSize)
		if err := fn(keys[:n]); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// Usage is what run id's ended attempts used together, as [Engine.Status] sums it, with the
// overlay's attempts of the run in place of their table rows, nil when nothing was used.
func (r *Reader) Usage(ctx context.Context, id string) (*budget.Usage, error) {
	var u budget.Usage
	err := readTx(ctx, r.db, func(q querier, ov *overlay) error {
		var err error
		u, err = sumUsage(ctx, q, ov, id)
		return err
	})
	if err != nil || u.IsZero() {
		return nil, err
	}
	return &u, nil
}

// usageSums are the sums of an attempt usage's fields, as the triggers of run_usage take
// them from its JSON (schema.go).
const usageSums = `TOTAL(json_extract(usage, '$.input_tokens')), TOTAL(json_extract(usage, '$.output_tokens')),
	TOTAL(json_extract(usage, '$.cached_tokens')), TOTAL(json_extract(usage, '$.model_calls')), TOTAL(json_extract(usage, '$.cost_usd'))`

// sumUsage is run id's usage in q, as ov leaves its attempts: the sums the triggers keep in
// run_usage with the rows (schema.go), less the table rows of the attempts the overlay
// holds, plus the overlay's images of them. It costs the overlay's attempts of the run,
// never a scan of the run's attempts.
func sumUsage(ctx context.Context, q querier, ov *overlay, id string) (budget.Usage, error) {
	var in, out, cached, calls, cost float64
	err := q.QueryRowContext(ctx, `SELECT input_tokens, output_tokens, cached_tokens, model_calls, cost_usd FROM run_usage WHERE run_id = ?`, id).
		Scan(&in, &out, &cached, &calls, &cost)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return budget.Usage{}, fmt.Errorf("run %s: sum its usage: %w", id, err)
	}
	mine := ov.attemptsOf(id)
	var ids []any
	for _, a := range mine {
		ids = append(ids, a.dispatchID)
	}
	// The overlay's rows replace the table's.
	err = inChunks(ids, func(part []any) error {
		var i, o, c, m, x float64
		err := q.QueryRowContext(ctx, `SELECT `+usageSums+` FROM attempts WHERE dispatch_id IN (`+placeholders(len(part))+`)
			AND usage != '' AND json_valid(usage)`, part...).Scan(&i, &o, &c, &m, &x)
		in, out, cached, calls, cost = in-i, out-o, cached-c, calls-m, cost-x
		return err
	})
	if err != nil {
		return budget.Usage{}, fmt.Errorf("run %s: sum its usage: %w", id, err)
	}
	u := budget.Usage{InputTokens: int64(in), OutputTokens: int64(out), CachedTokens: int64(cached), ModelCalls: int64(calls)}
	for _, a := range mine {
		if a.usage == "" {
			continue
		}
		var au budget.Usage
		if err := json.Unmarshal([]byte(a.usage), &au); err != nil {
			return budget.Usage{}, fmt.Errorf("run %s: attempt %s's usage: %w", id, a.dispatchID, err)
		}
		u.InputTokens, u.OutputTokens, u.CachedTokens, u.ModelCalls = u.InputTokens+au.InputTokens, u.OutputTokens+au.OutputTokens,
			u.CachedTokens+au.CachedTokens, u.ModelCalls+au.ModelCalls
		cost += au.CostUSD
	}
	u.CostUSD = math.Round(cost*1e9) / 1e9
	return u, nil
}

// taskRowFrom reads a task with its latest attempt's verdict (as Status shows it); queries
// name the task's columns t.* .
const taskRowFrom = `SELECT t.idx, t.id, t.state, t.attempts, t.dispatch_id, t.reason, t.detail, t.question, t.retry_at, t.review,
	COALESCE(a.verdict, '') FROM tasks t LEFT JOIN attempts a ON a.dispatch_id = t.dispatch_id AND t.dispatch_id != '' `

// rawTask is a task row as taskRowFrom reads it, before the overlay is applied and its
// fields parsed.
type rawTask struct {
	idx                                                            int
	id, state                                                      string
	attempts                                                       int
	dispatchID, reason, detail, question, retryAt, review, verdict string
}

func scanRawTask(s rowScanner) (rawTask, error) {
	var t rawTask
	err := s.Scan(&t.idx, &t.id, &t.state, &t.attempts, &t.dispatchID, &t.reason, &t.detail, &t.question, &t.retryAt, &t.review, &t.verdict)
	return t, err
}

// patch applies ov to t, a task of run: its columns as the overlay's image of it has them,
// and the verdict of its latest attempt as the overlay or the attempts table has it.
func (t *rawTask) patch(ctx context.Context, q querier, ov *overlay, run string) error {
	img, ok := ov.task(run, t.idx)
	if !ok {
		if a, ok := ov.attempt(t.dispatchID); ok && t.dispatchID != "" {
			t.verdict = a.verdict
		}
		return nil
	}
	t.state, t.attempts, t.dispatchID, t.reason, t.detail = img.state, img.attempts, img.dispatchID, img.reason, img.detail
	t.question, t.retryAt, t.review, t.verdict = img.question, img.retryAt, img.review, ""
	if t.dispatchID == "" {
		return nil
	}
	if a, ok := ov.attempt(t.dispatchID); ok {
		t.verdict = a.verdict
		return nil
	}
	err := q.QueryRowContext(ctx, `SELECT verdict FROM attempts WHERE dispatch_id = ?`, t.dispatchID).Scan(&t.verdict)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("task %s: read its attempt's verdict: %w", t.id, err)
	}
	return nil
}

// row parses t's fields.
func (t *rawTask) row() (TaskRow, error) {
	out := TaskRow{Index: t.idx}
	out.ID, out.State, out.Attempts, out.DispatchID, out.Question = t.id, t.state, t.attempts, t.dispatchID, t.question
	out.Reason, out.Detail = settledReason(t.state, t.reason, t.detail)
	if t.retryAt != "" {
		if at, err := time.Parse(time.RFC3339Nano, t.retryAt); err == nil {
			out.RetryAt = &at
		}
	}
	if t.review != "" {
		rv, err := decodeStoredReview(t.review)
		if err != nil {
			return out, fmt.Errorf("task %s: %w", t.id, err)
		}
		out.Review = rv
	}
	if t.verdict != "" {
		v, err := verdict.Parse([]byte(t.verdict))
		if err != nil {
			return out, fmt.Errorf("task %s: its verdict: %w", t.id, err)
		}
		out.Verdict = &v
	}
	return out, nil
}

// taskRows reads run id's tasks taskRowFrom+query selects, as ov leaves them; keep, when
// set, filters them after the overlay is applied, and limit (> 0) bounds how many it keeps.
func taskRows(ctx context.Context, q querier, ov *overlay, id, query string, keep func(*rawTask) bool, limit int, args ...any) ([]TaskRow, error) {
	rows, err := q.QueryContext(ctx, taskRowFrom+query, args...)
	if err != nil {
		return nil, fmt.Errorf("read tasks: %w", err)
	}
	defer rows.Close()
	out := []TaskRow{}
	for rows.Next() && (limit <= 0 || len(out) < limit) {
		t, err := scanRawTask(rows)
		if err != nil {
			return nil, fmt.Errorf("read tasks: %w", err)
		}
		if err := t.patch(ctx, q, ov, id); err != nil {
			return nil, err
		}
		if keep != nil && !keep(&t) {
			continue
		}
		row, err := t.row()
		if err != nil {
			return nil, fmt.Errorf("read tasks: %w", err)
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// readTasks is taskRows in a read transaction of its own.
func (r *Reader) readTasks(ctx context.Context, id, query string, args ...any) (out []TaskRow, err error) {
	err = readTx(ctx, r.db, func(q querier, ov *overlay) error {
		out, err = taskRows(ctx, q, ov, id, query, nil, 0, args...)
		return err
	})
	return out, err
}

// Tasks returns up to limit of run id's tasks from plan position from on, in plan order.
func (r *Reader) Tasks(ctx context.Context, id string, from, limit int) ([]TaskRow, error) {
	return r.readTasks(ctx, id, `WHERE t.run_id = ? AND t.idx >= ? ORDER BY t.idx LIMIT ?`, id, from, limit)
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
	return r.readTasks(ctx, id, `WHERE t.run_id = ? AND t.idx IN (`+placeholders(len(idx))+`) ORDER BY t.idx`, args...)
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
	return r.readTasks(ctx, id, `WHERE t.run_id = ? AND t.id IN (`+placeholders(len(ids))+`) ORDER BY t.idx`, args...)
}

// TasksIn returns up to limit of run id's tasks in state, in plan order.
func (r *Reader) TasksIn(ctx context.Context, id, state string, limit int) (out []TaskRow, err error) {
	err = readTx(ctx, r.db, func(q querier, ov *overlay) error {
		if !ov.touches(id) {
			out, err = taskRows(ctx, q, ov, id, `WHERE t.run_id = ? AND t.state = ? ORDER BY t.idx LIMIT ?`, nil, 0, id, state, limit)
			return err
		}
		// A row's state may be the overlay's: the run's rows are filtered here.
		out, err = taskRows(ctx, q, ov, id, `WHERE t.run_id = ? ORDER BY t.idx`, func(t *rawTask) bool { return t.state == state }, limit, id)
		return err
	})
	return out, err
}

// Task returns run id's task taskID, with why the run added it and, for a task that
// succeeded with a fix of its work, the fix's dispatch (as [Engine.Status] says both).
func (r *Reader) Task(ctx context.Context, id, taskID string) (TaskRow, error) {
	var t TaskRow
	err := readTx(ctx, r.db, func(q querier, ov *overlay) error {
		rows, err := taskRows(ctx, q, ov, id, `WHERE t.run_id = ? AND t.id = ?`, nil, 0, id, taskID)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return &errclass.NotFoundError{Kind: "task", ID: taskID, In: "run " + id, Of: ErrNotFound}
		}
		t = rows[0]
		return extensionOf(ctx, q, ov, id, &t)
	})
	return t, err
}

// extensionOf sets t.Added and t.Product from run id's extension rows: the row whose tasks
// hold t's position added it (the engine writes each row with the positions of its tasks),
// and the newest fix of t that succeeded is its product when t succeeded ([setProducts]).
// Each is one scan of the run's extension rows, without their data.
func extensionOf(ctx context.Context, q querier, ov *overlay, id string, t *TaskRow) error {
	var a api.Added
	err := q.QueryRowContext(ctx, `SELECT cause, task FROM run_extensions WHERE run_id = ? AND first <= ? AND ? < first + count`,
		id, t.Index, t.Index).Scan(&a.Cause, &a.Task)
	switch {
	case err == nil:
		t.Added = &a
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("task %s: read its extension: %w", t.ID, err)
	}
	if t.State != lifecycle.TaskSucceeded {
		return nil
	}
	// The fixes' rows, newest first; the first that succeeded (as ov leaves it) is the product.
	rows, err := q.QueryContext(ctx, `SELECT f.idx, f.state, f.dispatch_id FROM run_extensions x JOIN tasks f ON f.run_id = x.run_id AND f.idx = x.first
		WHERE x.run_id = ? AND x.cause = ? AND x.task = ? ORDER BY x.seq DESC`, id, causeFix, t.ID)
	if err != nil {
		return fmt.Errorf("task %s: read its product: %w", t.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var idx int
		var state, dispatchID string
		if err := rows.Scan(&idx, &state, &dispatchID); err != nil {
			return fmt.Errorf("task %s: read its product: %w", t.ID, err)
		}
		if img, ok := ov.task(id, idx); ok {
			state, dispatchID = img.state, img.dispatchID
		}
		if state == lifecycle.TaskSucceeded {
			t.Product = dispatchID
			break
		}
	}
	return rows.Err()
}

// attemptIDs reads run id's attempts (dispatch id by task position, oldest first) the query
// selects (task_idx, number, dispatch_id: ordered by task_idx, number), with the overlay's
// attempts of the run for which in(task position) holds merged in.
func attemptIDs(ctx context.Context, q querier, ov *overlay, id string, in func(int) bool, query string, args ...any) (map[int][]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	defer rows.Close()
	type row struct {
		idx, number int
		id          string
	}
	var all []row
	for rows.Next() {
		var x row
		if err := rows.Scan(&x.idx, &x.number, &x.id); err != nil {
			return nil, err
		}
		if _, ok := ov.attempt(x.id); !ok {
			all = append(all, x)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if ov.touches(id) {
		for _, a := range ov.attemptsOf(id) {
			if in(a.taskIdx) {
				all = append(all, row{a.taskIdx, a.number, a.dispatchID})
			}
		}
		slices.SortStableFunc(all, func(a, b row) int {
			if a.idx != b.idx {
				return a.idx - b.idx
			}
			return a.number - b.number
		})
	}
	out := map[int][]string{}
	for _, x := range all {
		out[x.idx] = append(out[x.idx], x.id)
	}
	return out, nil
}

// Attempts returns the dispatch ids of every attempt of run id's task at plan position idx,
// oldest first.
func (r *Reader) Attempts(ctx context.Context, id string, idx int) (out []string, err error) {
	err = readTx(ctx, r.db, func(q querier, ov *overlay) error {
		m, err := attemptIDs(ctx, q, ov, id, func(i int) bool { return i == idx },
			`SELECT task_idx, number, dispatch_id FROM attempts WHERE run_id = ? AND task_idx = ? ORDER BY number`, id, idx)
		out = m[idx]
		return err
	})
	return out, err
}

// AttemptsIn returns the dispatch ids of every attempt of run id's tasks at plan positions
// from to to (inclusive), by position, oldest first: one range of the attempts index.
func (r *Reader) AttemptsIn(ctx context.Context, id string, from, to int) (out map[int][]string, err error) {
	err = readTx(ctx, r.db, func(q querier, ov *overlay) error {
		out, err = attemptIDs(ctx, q, ov, id, func(i int) bool { return from <= i && i <= to },
			`SELECT task_idx, number, dispatch_id FROM attempts WHERE run_id = ? AND task_idx BETWEEN ? AND ? ORDER BY task_idx, number`, id, from, to)
		return err
	})
	return out, err
}

// AttemptRuns returns, of the dispatch ids given, those that are attempts of a run, with the
// run's id. Each is one lookup by the attempts table's key.
func (r *Reader) AttemptRuns(ctx context.Context, dispatchIDs []string) (out map[string]string, err error) {
	err = readTx(ctx, r.db, func(q querier, ov *overlay) error {
		out, err = attemptRuns(ctx, q, ov, dispatchIDs)
		return err
	})
	return out, err
}

func attemptRuns(ctx context.Context, q querier, ov *overlay, dispatchIDs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, d := range dispatchIDs {
		if a, ok := ov.attempt(d); ok {
			out[d] = a.runID
		}
	}
	for len(dispatchIDs) > 0 {
		n := min(len(dispatchIDs), 500)
		args := make([]any, n)
		for i, d := range dispatchIDs[:n] {
			args[i] = d
		}
		rows, err := q.QueryContext(ctx, `SELECT dispatch_id, run_id FROM attempts WHERE dispatch_id IN (`+placeholders(n)+`)`, args...)
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
// bundle binds (two scans of the run's rows, no plan read), in one read transaction.
func (r *Reader) AllAttempts(ctx context.Context, id string) (out []TaskAttempts, err error) {
	err = readTx(ctx, r.db, func(q querier, ov *overlay) error {
		rows, err := taskRows(ctx, q, ov, id, `WHERE t.run_id = ? ORDER BY t.idx`, nil, 0, id)
		if err != nil {
			return err
		}
		byIdx, err := attemptIDs(ctx, q, ov, id, func(int) bool { return true },
			`SELECT task_idx, number, dispatch_id FROM attempts WHERE run_id = ? ORDER BY task_idx, number`, id)
		if err != nil {
			return err
		}
		out = make([]TaskAttempts, len(rows))
		for i, t := range rows {
			out[i] = TaskAttempts{ID: t.ID, Dispatches: byIdx[t.Index]}
		}
		return nil
	})
	return out, err
}
