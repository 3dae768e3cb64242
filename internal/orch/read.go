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
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/verdict"
)

// Reads go to the database, never to the engine's memory: everything the engine decided is
// committed before anyone hears of it, so the database is the answer.

// Status returns a run (by id or name) with its tasks.
func (e *Engine) Status(ctx context.Context, ref string) (api.Run, error) {
	return status(ctx, e.db.SQL(), ref, func(id string) (any, bool) { return e.specs.Load(id) })
}

// ReadStatus is [Engine.Status] over an orch.db no engine has open: `agora orch status`
// reads a snapshot with it when serve is not running. db SHOULD be opened read-only.
func ReadStatus(ctx context.Context, db *sql.DB, ref string) (api.Run, error) {
	return status(ctx, db, ref, func(string) (any, bool) { return nil, false })
}

// status reads run ref from db; cached returns a run's resolved specs when an engine holds
// them, else they are parsed from the stored plan.
func status(ctx context.Context, db *sql.DB, ref string, cached func(id string) (any, bool)) (api.Run, error) {
	// An id is that run; a name, its newest run.
	r, err := scanRun(db.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ? OR name = ?
		ORDER BY id = ? DESC, created_at DESC, id DESC LIMIT 1`, ref, ref, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return api.Run{}, runNotFound(ctx, db, ref)
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
	var specs []plan.Resolved
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
		specs, r.Concurrency, runBudget, r.Queue = p.Resolve(), p.Concurrency, p.Budget, p.QueueName()
		if specs, added, err = extendedSpecs(ctx, db, r.ID, specs); err != nil {
			return api.Run{}, err
		}
	}
	planTasks := len(specs) - len(added)
	if !runBudget.IsZero() {
		r.Budget = &runBudget
	}
	u, err := runUsage(ctx, db, r.ID)
	if err != nil {
		return api.Run{}, err
	}
	if !u.IsZero() {
		r.Usage = &u
	}
	r.Total = len(specs)
	r.Tasks = make([]api.Task, len(specs))
	for i, s := range specs {
		t := api.Task{ID: s.ID, Subagent: s.Subagent, DependsOn: s.Deps, Verify: s.Verify, Learn: s.Learn}
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
		t := &r.Tasks[idx]
		if review != "" {
			if t.Review, err = decodeStoredReview(review); err != nil {
				return api.Run{}, fmt.Errorf("run %s task %s: %w", r.ID, t.ID, err)
			}
		}
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
	arows, err := db.QueryContext(ctx, `SELECT task_idx, dispatch_id, verdict FROM attempts WHERE run_id = ? ORDER BY task_idx, number`, r.ID)
	if err != nil {
		return api.Run{}, err
	}
	defer arows.Close()
	for arows.Next() {
		var idx int
		var id, vj string
		if err := arows.Scan(&idx, &id, &vj); err != nil {
			return api.Run{}, err
		}
		if idx < 0 || idx >= len(r.Tasks) {
			continue
		}
		t := &r.Tasks[idx]
		t.Dispatches = append(t.Dispatches, id)
		if vj != "" && id == t.DispatchID {
			v, err := verdict.Parse([]byte(vj))
			if err != nil {
				return api.Run{}, fmt.Errorf("run %s task %s: its verdict: %w", r.ID, t.ID, err)
			}
			t.Verdict = &v
		}
	}
	if err := arows.Err(); err != nil {
		return api.Run{}, err
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
		if x.Added == nil || x.Added.Cause != causeFix || x.State != api.TaskSucceeded {
			continue
		}
		if index == nil {
			index = make(map[string]int, len(tasks))
			for j := range tasks {
				index[tasks[j].ID] = j
			}
		}
		if j, ok := index[x.Added.Task]; ok && tasks[j].State == api.TaskSucceeded {
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
	for i := range out {
		crow, err := e.db.SQL().QueryContext(ctx, `SELECT state, COUNT(*) FROM tasks WHERE run_id = ? GROUP BY state`, out[i].ID)
		if err != nil {
			return nil, err
		}
		for crow.Next() {
			var s string
			var n int
			if err := crow.Scan(&s, &n); err != nil {
				crow.Close()
				return nil, err
			}
			out[i].Counts[s] = n
			out[i].Total += n
		}
		crow.Close()
	}
	return out, nil
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

// runUsage is the sum of what the run's ended attempts used, as their rows record it.
func runUsage(ctx context.Context, db *sql.DB, runID string) (budget.Usage, error) {
	rows, err := db.QueryContext(ctx, `SELECT usage FROM attempts WHERE run_id = ? AND usage != ''`, runID)
	if err != nil {
		return budget.Usage{}, fmt.Errorf("run %s: read its usage: %w", runID, err)
	}
	defer rows.Close()
	var sum budget.Usage
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return budget.Usage{}, err
		}
		var u budget.Usage
		if err := json.Unmarshal([]byte(s), &u); err != nil {
			return budget.Usage{}, fmt.Errorf("run %s: an attempt's usage: %w", runID, err)
		}
		sum = sum.Add(u)
	}
	return sum, rows.Err()
}
