package orch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/verdict"
)

// Reads go to the database, never to the engine's memory: everything the engine decided is
// committed before anyone hears of it, so the database is the answer.

// Status returns a run (by id or name) with its tasks.
func (e *Engine) Status(ctx context.Context, ref string) (api.Run, error) {
	return gathered(func(each TaskFunc) (api.Run, error) { return e.StatusEach(ctx, ref, each) })
}

// TaskFunc is handed a run's tasks one at a time, in position order: run is the run as read
// so far (its fields, without tasks, counts or next step), t the task, valid only until it
// returns. An error stops the read and is returned as it is.
type TaskFunc func(run *api.Run, t *api.Task) error

// StatusEach reads a run (by id or name) as [Engine.Status] does, but hands its tasks to each
// one at a time, in position order, instead of gathering them: the run returned has its counts
// and next step and no tasks. A reader that writes the tasks out as they come holds one at a
// time: a run of 100,000 tasks has tens of MB of task views. A nil each reads the run without
// its tasks.
func (e *Engine) StatusEach(ctx context.Context, ref string, each TaskFunc) (api.Run, error) {
	return readStatus(ctx, e.db.SQL(), ref, func(id string) (any, bool) { return e.specs.Load(id) }, each)
}

// ReadStatus is [Engine.Status] over an orch.db no engine has open: `agora orch status`
// reads a snapshot with it when serve is not running. db SHOULD be opened read-only.
func ReadStatus(ctx context.Context, db *sql.DB, ref string) (api.Run, error) {
	return gathered(func(each TaskFunc) (api.Run, error) {
		return readStatus(ctx, db, ref, func(string) (any, bool) { return nil, false }, each)
	})
}

// gathered runs read with a TaskFunc that keeps every task, and returns its run with them.
func gathered(read func(TaskFunc) (api.Run, error)) (api.Run, error) {
	var tasks []api.Task
	r, err := read(func(run *api.Run, t *api.Task) error {
		if tasks == nil {
			tasks = make([]api.Task, 0, run.Total)
		}
		tasks = append(tasks, *t)
		return nil
	})
	if err != nil {
		return api.Run{}, err
	}
	r.Tasks = tasks
	return r, nil
}

// readStatus is status in one read transaction of db, with the row log's overlay.
func readStatus(ctx context.Context, db *sql.DB, ref string, cached func(id string) (any, bool), each TaskFunc) (out api.Run, err error) {
	err = readTx(ctx, db, func(q querier, ov *overlay) error {
		out, err = status(ctx, q, ov, ref, cached, each)
		if errors.Is(err, sql.ErrNoRows) {
			err = errRunNotFound
		}
		return err
	})
	if errors.Is(err, errRunNotFound) {
		return api.Run{}, runNotFound(ctx, db, ref)
	}
	return out, err
}

// errRunNotFound is status's: readStatus says why (runNotFound) outside its transaction.
var errRunNotFound = errors.New("run not found")

// runByRef reads the row of run ref from q: the run of that id, else the newest run of that
// name, with NameRuns set when the name is shared. sql.ErrNoRows when there is none.
func runByRef(ctx context.Context, q querier, ref string) (api.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ? OR name = ?
		ORDER BY id = ? DESC, created_at DESC, id DESC LIMIT 1`, ref, ref, ref))
	if err != nil {
		return api.Run{}, err
	}
	if r.ID != ref {
		// Asked for by name: say when the name is shared, so nobody mistakes the newest run
		// for the only one.
		var n int
		if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE name = ?`, ref).Scan(&n); err != nil {
			return api.Run{}, err
		}
		if n > 1 {
			r.NameRuns = n
		}
	}
	return r, nil
}

// status reads run ref from q as ov leaves it, handing its tasks to each (when not nil) in
// position order; cached returns a run's resolved specs when an engine holds them, else they
// are parsed from the stored plan. The tasks are read in one pass over the task rows and one
// over the attempt rows, both in position order, so the read holds one task's view at a time.
func status(ctx context.Context, q querier, ov *overlay, ref string, cached func(id string) (any, bool), each TaskFunc) (api.Run, error) {
	r, err := runByRef(ctx, q, ref)
	if errors.Is(err, sql.ErrNoRows) {
		return api.Run{}, errRunNotFound
	}
	if err != nil {
		return api.Run{}, err
	}
	var specs []*plan.Resolved
	var added []api.Added
	var runBudget budget.Budget
	if cached, ok := cached(r.ID); ok {
		rs := cached.(runSpecs)
		specs, r.Concurrency, runBudget, r.Queue, added = rs.tasks, rs.concurrency, rs.budget, rs.queue, rs.added
	} else {
		var canonical []byte
		if err := q.QueryRowContext(ctx, `SELECT plan FROM run_plans WHERE run_id = ?`, r.ID).Scan(&canonical); err != nil {
			return api.Run{}, fmt.Errorf("run %s: read its plan: %w", r.ID, err)
		}
		p, err := plan.Parse("orch.db run "+r.ID, canonical)
		if err != nil {
			return api.Run{}, fmt.Errorf("run %s: stored plan: %w", r.ID, err)
		}
		r.Concurrency, runBudget, r.Queue = p.Concurrency, p.Budget, p.QueueName()
		var resolved []plan.Resolved
		if resolved, added, err = extendedSpecs(ctx, q, r.ID, p.Resolve()); err != nil {
			return api.Run{}, err
		}
		specs = make([]*plan.Resolved, len(resolved))
		for i := range resolved {
			specs[i] = &resolved[i]
		}
	}
	planTasks := len(specs) - len(added)
	if !runBudget.IsZero() {
		r.Budget = &runBudget
	}
	u, err := runUsageIn(ctx, q, ov, r.ID)
	if err != nil {
		return api.Run{}, err
	}
	if !u.IsZero() {
		r.Usage = &u
	}
	r.Total = len(specs)
	products, err := runProducts(ctx, q, ov, r.ID, specs, added)
	if err != nil {
		return api.Run{}, err
	}
	rows, err := newTaskCursor(ctx, q, ov, r.ID, len(specs))
	if err != nil {
		return api.Run{}, err
	}
	defer rows.close()
	atts, err := newAttemptCursor(ctx, q, ov, r.ID)
	if err != nil {
		return api.Run{}, err
	}
	defer atts.close()
	var waiting []string // the tasks that ask a question, for the next step
	for i, s := range specs {
		row, ok, err := rows.at(i)
		if err != nil {
			return api.Run{}, err
		}
		if !ok && i >= planTasks {
			// The engine holds an extension's tasks before the commit that writes their rows,
			// and extensions commit in order: this task and those after it are not in the
			// snapshot yet. The run is shown as the snapshot has it.
			r.Total = i
			break
		}
		t := taskView(s)
		if i >= planTasks {
			a := added[i-planTasks]
			t.Added = &a
		}
		if ok {
			if err := row.apply(&t); err != nil {
				return api.Run{}, fmt.Errorf("run %s task %s: %w", r.ID, t.ID, err)
			}
			r.Counts[t.State]++
			if t.State == lifecycle.TaskNeedsInput {
				waiting = append(waiting, t.ID)
			}
		}
		if err := atts.at(i, func(a attemptImage) error {
			t.Dispatches = append(t.Dispatches, a.dispatchID)
			if a.verdict != "" && a.dispatchID == t.DispatchID {
				v, err := verdict.Parse([]byte(a.verdict))
				if err != nil {
					return fmt.Errorf("run %s task %s: its verdict: %w", r.ID, t.ID, err)
				}
				t.Verdict = &v
			}
			return nil
		}); err != nil {
			return api.Run{}, err
		}
		if t.State == lifecycle.TaskSucceeded {
			t.Product = products[i]
		}
		if each != nil {
			if err := each(&r, &t); err != nil {
				return api.Run{}, err
			}
		}
	}
	r.Next = nextStepOf(r, waiting)
	return r, nil
}

// taskView is a task's view as its spec alone makes it.
func taskView(s *plan.Resolved) api.Task {
	t := api.Task{ID: s.ID, Subagent: s.Subagent, DependsOn: s.Deps, Base: s.Base, Verify: s.Verify, Learn: s.Learn}
	for _, n := range s.Needs {
		if !slices.Contains(t.Needs, n.From) {
			t.Needs = append(t.Needs, n.From)
		}
	}
	slices.Sort(t.Needs)
	for _, l := range s.Locks {
		name := l.Name
		if l.Mode == "shared" {
			name += " (shared)"
		}
		t.Locks = append(t.Locks, name)
	}
	return t
}

// runProducts returns, by position, the product of each task that a fix of its work ended:
// the dispatch of the last such fix that succeeded ([api.Task.Product], shown when the task
// itself succeeded). nil when the run has no fix that succeeded. Fixes are added tasks, so it
// reads only the rows past the plan's.
func runProducts(ctx context.Context, q querier, ov *overlay, id string, specs []*plan.Resolved, added []api.Added) (map[int]string, error) {
	planTasks := len(specs) - len(added)
	if !slices.ContainsFunc(added, func(a api.Added) bool { return a.Cause == causeFix }) {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT idx, state, dispatch_id FROM tasks WHERE run_id = ? AND idx >= ? ORDER BY idx`, id, planTasks)
	if err != nil {
		return nil, fmt.Errorf("run %s: read its fixes: %w", id, err)
	}
	defer rows.Close()
	var index map[string]int
	var out map[int]string
	for rows.Next() {
		var idx int
		var state, dispatchID string
		if err := rows.Scan(&idx, &state, &dispatchID); err != nil {
			return nil, fmt.Errorf("run %s: read its fixes: %w", id, err)
		}
		if img, ok := ov.task(id, idx); ok {
			state, dispatchID = img.state, img.dispatchID
		}
		if idx < planTasks || idx >= len(specs) || added[idx-planTasks].Cause != causeFix || state != lifecycle.TaskSucceeded {
			continue
		}
		if index == nil {
			index = make(map[string]int, len(specs))
			for j, s := range specs {
				index[s.ID] = j
			}
			out = map[int]string{}
		}
		if j, ok := index[added[idx-planTasks].Task]; ok {
			out[j] = dispatchID
		}
	}
	return out, rows.Err()
}

// taskCursor reads a run's task rows in position order, as the overlay leaves them.
type taskCursor struct {
	rows  *sql.Rows
	ov    *overlay
	id    string
	n     int // positions in range: [0, n)
	next  taskRow
	have  bool
	ended bool
}

// taskRow is one task row's stored fields.
type taskRow struct {
	idx, attempts                               int
	state, dispatchID, reason, detail, question string
	retryAt, review                             string
}

func newTaskCursor(ctx context.Context, q querier, ov *overlay, id string, n int) (*taskCursor, error) {
	rows, err := q.QueryContext(ctx, `SELECT idx, state, attempts, dispatch_id, reason, detail, question, retry_at, review
		FROM tasks WHERE run_id = ? ORDER BY idx`, id)
	if err != nil {
		return nil, fmt.Errorf("run %s: read its tasks: %w", id, err)
	}
	return &taskCursor{rows: rows, ov: ov, id: id, n: n}, nil
}

// at returns the row at position i, false when there is none. Positions are asked for in
// increasing order; a row out of range is passed over.
func (c *taskCursor) at(i int) (taskRow, bool, error) {
	for !c.have && !c.ended {
		if !c.rows.Next() {
			c.ended = true
			if err := c.rows.Err(); err != nil {
				return taskRow{}, false, fmt.Errorf("run %s: read its tasks: %w", c.id, err)
			}
			break
		}
		x := &c.next
		if err := c.rows.Scan(&x.idx, &x.state, &x.attempts, &x.dispatchID, &x.reason, &x.detail, &x.question, &x.retryAt, &x.review); err != nil {
			return taskRow{}, false, fmt.Errorf("run %s: read its tasks: %w", c.id, err)
		}
		if x.idx < 0 || x.idx >= c.n {
			continue
		}
		if img, ok := c.ov.task(c.id, x.idx); ok {
			x.state, x.attempts, x.dispatchID, x.reason, x.detail = img.state, img.attempts, img.dispatchID, img.reason, img.detail
			x.question, x.retryAt, x.review = img.question, img.retryAt, img.review
		}
		c.have = true
	}
	if !c.have || c.next.idx > i {
		return taskRow{}, false, nil
	}
	c.have = false
	return c.next, c.next.idx == i, nil
}

func (c *taskCursor) close() { c.rows.Close() }

// apply sets t's state and what goes with it from the row.
func (x taskRow) apply(t *api.Task) error {
	if x.review != "" {
		rv, err := decodeStoredReview(x.review)
		if err != nil {
			return err
		}
		t.Review = rv
	}
	reason, detail := settledReason(x.state, x.reason, x.detail)
	t.State, t.Attempts, t.DispatchID, t.Reason, t.Detail, t.Question = x.state, x.attempts, x.dispatchID, reason, detail, x.question
	if x.retryAt != "" {
		if at, err := time.Parse(time.RFC3339Nano, x.retryAt); err == nil {
			t.RetryAt = &at
		}
	}
	return nil
}

// attemptCursor reads a run's attempts (position, number, dispatch id, verdict) by position
// then number, as the overlay leaves them: the rows it does not replace merged with its own.
type attemptCursor struct {
	rows  *sql.Rows
	ov    *overlay
	id    string
	mine  []attemptImage // the overlay's, in the same order
	next  attemptImage
	have  bool
	ended bool
}

func newAttemptCursor(ctx context.Context, q querier, ov *overlay, id string) (*attemptCursor, error) {
	rows, err := q.QueryContext(ctx, `SELECT task_idx, number, dispatch_id, verdict FROM attempts WHERE run_id = ? ORDER BY task_idx, number`, id)
	if err != nil {
		return nil, fmt.Errorf("run %s: read its attempts: %w", id, err)
	}
	return &attemptCursor{rows: rows, ov: ov, id: id, mine: ov.attemptsOf(id)}, nil
}

// row makes the next row the cursor does not pass over current, if there is one.
func (c *attemptCursor) row() error {
	for !c.have && !c.ended {
		if !c.rows.Next() {
			c.ended = true
			if err := c.rows.Err(); err != nil {
				return fmt.Errorf("run %s: read its attempts: %w", c.id, err)
			}
			break
		}
		a := &c.next
		if err := c.rows.Scan(&a.taskIdx, &a.number, &a.dispatchID, &a.verdict); err != nil {
			return fmt.Errorf("run %s: read its attempts: %w", c.id, err)
		}
		if _, ok := c.ov.attempt(a.dispatchID); !ok {
			c.have = true
		}
	}
	return nil
}

// at hands fn the attempts at position i, oldest first, passing over any before it (a
// position out of range). Positions are asked for in increasing order.
func (c *attemptCursor) at(i int, fn func(attemptImage) error) error {
	for {
		if err := c.row(); err != nil {
			return err
		}
		// The row's or the overlay's, whichever comes first (the row when both are equal).
		var a attemptImage
		switch {
		case c.have && (len(c.mine) == 0 || !before(c.mine[0], c.next)):
			if c.next.taskIdx > i {
				return nil
			}
			a, c.have = c.next, false
		case len(c.mine) > 0:
			if c.mine[0].taskIdx > i {
				return nil
			}
			a, c.mine = c.mine[0], c.mine[1:]
		default:
			return nil
		}
		if a.taskIdx == i {
			if err := fn(a); err != nil {
				return err
			}
		}
	}
}

// before orders attempts by position, then number.
func before(a, b attemptImage) bool {
	if a.taskIdx != b.taskIdx {
		return a.taskIdx < b.taskIdx
	}
	return a.number < b.number
}

func (c *attemptCursor) close() { c.rows.Close() }

// Runs lists runs, newest first.
func (e *Engine) Runs(ctx context.Context, limit int) ([]api.Run, error) {
	if limit <= 0 {
		limit = 50
	}
	rows, err := e.db.SQL().QueryContext(ctx, `SELECT `+runColumns+` FROM runs ORDER BY created_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []api.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	err = readTx(ctx, e.db.SQL(), func(q querier, ov *overlay) error {
		for i := range out {
			counts, total, err := runCounts(ctx, q, ov, out[i].ID)
			if err != nil {
				return err
			}
			out[i].Counts, out[i].Total = counts, total
		}
		return nil
	})
	return out, err
}

const runColumns = `id, name, state, digest, actor, workspace, repo, revision, cancel_requested, created_at, ended_at, sealed_at, trace_id,
	queue, schedule, slot, missed`

type rowScanner interface{ Scan(...any) error }

func scanRun(row rowScanner) (api.Run, error) {
	var r api.Run
	var created, ended, sealed, slot string
	if err := row.Scan(&r.ID, &r.Name, &r.State, &r.PlanDigest, &r.Actor, &r.Workspace, &r.Repo, &r.Revision, &r.CancelAsked,
		&created, &ended, &sealed, &r.TraceID, &r.Queue, &r.Schedule, &slot, &r.Missed); err != nil {
		return r, err
	}
	if slot != "" {
		at, _ := time.Parse(time.RFC3339Nano, slot)
		r.Slot = &at
	}
	r.CreatedAt, _ = time.Parse(time.RFC3339Nano, created)
	if ended != "" {
		at, _ := time.Parse(time.RFC3339Nano, ended)
		r.EndedAt = &at
	}
	r.Sealed = sealed != ""
	r.Counts = map[string]int{}
	return r, nil
}

// runUsage is the sum of what the run's ended attempts used, as their rows record it (the
// engine's own load: the row log is folded first).
func runUsage(ctx context.Context, db querier, runID string) (budget.Usage, error) {
	return runUsageIn(ctx, db, nil, runID)
}

// runUsageIn is the sum of what run runID's ended attempts used, as their rows in q and ov
// record them.
func runUsageIn(ctx context.Context, q querier, ov *overlay, runID string) (budget.Usage, error) {
	rows, err := q.QueryContext(ctx, `SELECT dispatch_id, usage FROM attempts WHERE run_id = ? AND usage != ''`, runID)
	if err != nil {
		return budget.Usage{}, fmt.Errorf("run %s: read its usage: %w", runID, err)
	}
	defer rows.Close()
	var usages []string
	for rows.Next() {
		var id, s string
		if err := rows.Scan(&id, &s); err != nil {
			return budget.Usage{}, err
		}
		if _, ok := ov.attempt(id); !ok {
			usages = append(usages, s)
		}
	}
	if err := rows.Err(); err != nil {
		return budget.Usage{}, err
	}
	for _, a := range ov.attemptsOf(runID) {
		if a.usage != "" {
			usages = append(usages, a.usage)
		}
	}
	var sum budget.Usage
	for _, s := range usages {
		var u budget.Usage
		if err := json.Unmarshal([]byte(s), &u); err != nil {
			return budget.Usage{}, fmt.Errorf("run %s: an attempt's usage: %w", runID, err)
		}
		sum = sum.Add(u)
	}
	return sum, nil
}
