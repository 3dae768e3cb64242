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
	return readStatus(ctx, e.db.SQL(), ref, func(id string) (any, bool) { return e.specs.Load(id) })
}

// ReadStatus is [Engine.Status] over an orch.db no engine has open: `agora orch status`
// reads a snapshot with it when serve is not running. db SHOULD be opened read-only.
func ReadStatus(ctx context.Context, db *sql.DB, ref string) (api.Run, error) {
	return readStatus(ctx, db, ref, func(string) (any, bool) { return nil, false })
}

// readStatus is status in one read transaction of db, with the row log's overlay.
func readStatus(ctx context.Context, db *sql.DB, ref string, cached func(id string) (any, bool)) (out api.Run, err error) {
	err = readTx(ctx, db, func(q querier, ov *overlay) error {
		out, err = status(ctx, q, ov, ref, cached)
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

// status reads run ref from q as ov leaves it; cached returns a run's resolved specs when an
// engine holds them, else they are parsed from the stored plan.
func status(ctx context.Context, q querier, ov *overlay, ref string, cached func(id string) (any, bool)) (api.Run, error) {
	db := q
	// An id is that run; a name, its newest run.
	r, err := scanRun(db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ? OR name = ?
		ORDER BY id = ? DESC, created_at DESC, id DESC LIMIT 1`, ref, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return api.Run{}, errRunNotFound
	}
	if err != nil {
		return api.Run{}, err
	}
	if r.ID != ref {
		// Asked for by name: say when the name is shared, so nobody mistakes the newest run
		// for the only one.
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE name = ?`, ref).Scan(&n); err != nil {
			return api.Run{}, err
		}
		if n > 1 {
			r.NameRuns = n
		}
	}
	var specs []*plan.Resolved
	var added []api.Added
	var runBudget budget.Budget
	if cached, ok := cached(r.ID); ok {
		rs := cached.(runSpecs)
		specs, r.Concurrency, runBudget, r.Queue, added = rs.tasks, rs.concurrency, rs.budget, rs.queue, rs.added
	} else {
		var canonical []byte
		if err := db.QueryRowContext(ctx, `SELECT plan FROM run_plans WHERE run_id = ?`, r.ID).Scan(&canonical); err != nil {
			return api.Run{}, fmt.Errorf("run %s: read its plan: %w", r.ID, err)
		}
		p, err := plan.Parse("orch.db run "+r.ID, canonical)
		if err != nil {
			return api.Run{}, fmt.Errorf("run %s: stored plan: %w", r.ID, err)
		}
		r.Concurrency, runBudget, r.Queue = p.Concurrency, p.Budget, p.QueueName()
		var resolved []plan.Resolved
		if resolved, added, err = extendedSpecs(ctx, db, r.ID, p.Resolve()); err != nil {
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
	u, err := runUsageIn(ctx, db, ov, r.ID)
	if err != nil {
		return api.Run{}, err
	}
	if !u.IsZero() {
		r.Usage = &u
	}
	r.Total = len(specs)
	r.Tasks = make([]api.Task, len(specs))
	for i, s := range specs {
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
		if i >= planTasks {
			a := added[i-planTasks]
			t.Added = &a
		}
		r.Tasks[i] = t
	}
	rows, err := db.QueryContext(ctx, `SELECT idx, state, attempts, dispatch_id, reason, detail, question, retry_at, review FROM tasks WHERE run_id = ?`, r.ID)
	if err != nil {
		return api.Run{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var idx int
		var state, dispatchID, reason, detail, question, retryAt, review string
		var attempts int
		if err := rows.Scan(&idx, &state, &attempts, &dispatchID, &reason, &detail, &question, &retryAt, &review); err != nil {
			return api.Run{}, err
		}
		if idx < 0 || idx >= len(r.Tasks) {
			continue
		}
		if img, ok := ov.task(r.ID, idx); ok {
			state, attempts, dispatchID, reason, detail = img.state, img.attempts, img.dispatchID, img.reason, img.detail
			question, retryAt, review = img.question, img.retryAt, img.review
		}
		t := &r.Tasks[idx]
		if review != "" {
			if t.Review, err = decodeStoredReview(review); err != nil {
				return api.Run{}, fmt.Errorf("run %s task %s: %w", r.ID, t.ID, err)
			}
		}
		reason, detail = settledReason(state, reason, detail)
		t.State, t.Attempts, t.DispatchID, t.Reason, t.Detail, t.Question = state, attempts, dispatchID, reason, detail, question
		if retryAt != "" {
			if at, err := time.Parse(time.RFC3339Nano, retryAt); err == nil {
				t.RetryAt = &at
			}
		}
		r.Counts[state]++
	}
	if err := rows.Err(); err != nil {
		return api.Run{}, err
	}
	atts, err := runAttempts(ctx, db, ov, r.ID)
	if err != nil {
		return api.Run{}, err
	}
	for _, a := range atts {
		if a.taskIdx < 0 || a.taskIdx >= len(r.Tasks) {
			continue
		}
		t := &r.Tasks[a.taskIdx]
		t.Dispatches = append(t.Dispatches, a.dispatchID)
		if a.verdict != "" && a.dispatchID == t.DispatchID {
			v, err := verdict.Parse([]byte(a.verdict))
			if err != nil {
				return api.Run{}, fmt.Errorf("run %s task %s: its verdict: %w", r.ID, t.ID, err)
			}
			t.Verdict = &v
		}
	}
	setProducts(r.Tasks, planTasks)
	r.Next = nextStep(r)
	return r, nil
}

// setProducts names, on each loop task that succeeded with a fix, the fix's dispatch: what
// its dependents received and what its patch is.
func setProducts(tasks []api.Task, planTasks int) {
	var index map[string]int
	for i := planTasks; i < len(tasks); i++ {
		x := &tasks[i]
		if x.Added == nil || x.Added.Cause != causeFix || x.State != lifecycle.TaskSucceeded {
			continue
		}
		if index == nil {
			index = make(map[string]int, len(tasks))
			for j := range tasks {
				index[tasks[j].ID] = j
			}
		}
		if j, ok := index[x.Added.Task]; ok && tasks[j].State == lifecycle.TaskSucceeded {
			tasks[j].Product = x.DispatchID
		}
	}
}

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

// runAttempts reads run id's attempts (position, number, dispatch id and verdict) from q as
// ov leaves them, by position then number.
func runAttempts(ctx context.Context, q querier, ov *overlay, id string) ([]attemptImage, error) {
	rows, err := q.QueryContext(ctx, `SELECT task_idx, number, dispatch_id, verdict FROM attempts WHERE run_id = ? ORDER BY task_idx, number`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []attemptImage
	for rows.Next() {
		var a attemptImage
		if err := rows.Scan(&a.taskIdx, &a.number, &a.dispatchID, &a.verdict); err != nil {
			return nil, err
		}
		if _, ok := ov.attempt(a.dispatchID); !ok {
			out = append(out, a)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if mine := ov.attemptsOf(id); len(mine) > 0 {
		out = append(out, mine...)
		slices.SortStableFunc(out, func(a, b attemptImage) int {
			if a.taskIdx != b.taskIdx {
				return a.taskIdx - b.taskIdx
			}
			return a.number - b.number
		})
	}
	return out, nil
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
