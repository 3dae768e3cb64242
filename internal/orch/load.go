package orch

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// load rebuilds every run that is not sealed from the database. Lock holdings are not
// stored: a running task holds its locks, so they are derived here and can never leak.
func (e *Engine) load(ctx context.Context) error {
	db := e.db.SQL()
	rows, err := db.QueryContext(ctx, `SELECT id, name, digest, plan, state, actor, workspace, repo, revision, cancel_requested, created_at, ended_at,
		subagents FROM runs JOIN run_plans ON run_plans.run_id = runs.id WHERE sealed_at = '' ORDER BY created_at, id`)
	if err != nil {
		return fmt.Errorf("load runs: %w", err)
	}
	var runs []*run
	for rows.Next() {
		r := &run{counts: map[string]int{}}
		var created, ended string
		if err := rows.Scan(&r.id, &r.name, &r.digest, &r.canonical, &r.state, &r.actor, &r.workspace, &r.repo, &r.revision,
			&r.cancelRequested, &created, &ended, &r.pins); err != nil {
			rows.Close()
			return fmt.Errorf("load runs: %w", err)
		}
		if r.pins != "" {
			if err := json.Unmarshal([]byte(r.pins), &r.subagents); err != nil {
				rows.Close()
				return fmt.Errorf("load run %s: its subagent versions: %w", r.id, err)
			}
		}
		r.createdAt, _ = time.Parse(time.RFC3339Nano, created)
		if ended != "" {
			r.endedAt, _ = time.Parse(time.RFC3339Nano, ended)
		}
		runs = append(runs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load runs: %w", err)
	}
	var ready []*task
	for _, r := range runs {
		p, err := plan.Parse("orch.db run "+r.id, r.canonical)
		if err != nil {
			return fmt.Errorf("load run %s: its stored plan no longer parses: %w", r.id, err)
		}
		if d := p.Digest(); d != r.digest {
			return fmt.Errorf("load run %s: stored plan digest %s does not match its content %s", r.id, r.digest, d)
		}
		r.concurrency, r.canonical = p.Concurrency, nil // its row exists: the tasks hold the rest
		// As a submission does: the memory limit grows before the tasks are built.
		e.tellHeldAhead(len(p.Tasks))
		e.buildTasks(r, p)
		if err := e.loadExtensions(ctx, db, r); err != nil {
			return err
		}
		if err := e.loadTasks(ctx, db, r); err != nil {
			return err
		}
		subject := entry.Run(r.id)
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_entries WHERE `+audit.UnderSubject,
			audit.UnderSubjectArgs(subject)...).Scan(&r.entries); err != nil {
			return fmt.Errorf("load run %s: count its audit entries: %w", r.id, err)
		}
		e.resumeCascades(r)
		roots, err := loadUnskips(ctx, db, r)
		if err != nil {
			return err
		}
		e.resumeUnskips(r, roots)
		e.runs[r.id] = r
		if old, ok := e.byName[r.name]; !ok || !old.createdAt.After(r.createdAt) {
			e.byName[r.name] = r // the newest of the name
		}
		for _, t := range r.tasks {
			if t.readySeq > e.seq {
				e.seq = t.readySeq
			}
			switch t.state {
			case lifecycle.TaskReady:
				ready = append(ready, t)
			case lifecycle.TaskRunning:
				e.live[t.dispatchID] = t
				for _, lr := range t.locks {
					lr.l.acquire(t, lr.shared)
				}
				r.running++
				r.q.running++
				e.reattach = append(e.reattach, t)
			case lifecycle.TaskPending:
				if !t.retryAt.IsZero() {
					e.startTimer(t)
				}
			}
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].readySeq < ready[j].readySeq })
	e.candidates = ready
	return nil
}

// loadUnskips reads the positions of the roots of r's unskips that wait (unskip.go).
func loadUnskips(ctx context.Context, db *sql.DB, r *run) ([]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT idx FROM run_unskips WHERE run_id = ? ORDER BY idx`, r.id)
	if err != nil {
		return nil, fmt.Errorf("load run %s: its unskips waiting: %w", r.id, err)
	}
	defer rows.Close()
	var roots []int
	for rows.Next() {
		var idx int
		if err := rows.Scan(&idx); err != nil {
			return nil, fmt.Errorf("load run %s: its unskips waiting: %w", r.id, err)
		}
		if idx < 0 || idx >= len(r.tasks) {
			return nil, fmt.Errorf("load run %s: an unskip waits from task %d, and the run has %d tasks", r.id, idx, len(r.tasks))
		}
		roots = append(roots, idx)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load run %s: its unskips waiting: %w", r.id, err)
	}
	return roots, nil
}

// loadTasks applies the stored task rows to r's freshly built tasks.
func (e *Engine) loadTasks(ctx context.Context, db *sql.DB, r *run) error {
	rows, err := db.QueryContext(ctx, `SELECT idx, state, attempts, failures, dispatch_id, ready_seq, retry_at, reason, detail,
		question, answer, cancel, review FROM tasks WHERE run_id = ?`, r.id)
	if err != nil {
		return fmt.Errorf("load tasks of run %s: %w", r.id, err)
	}
	defer rows.Close()
	r.counts = map[string]int{}
	n := 0
	for rows.Next() {
		var idx, attempts, failures int
		var readySeq int64
		var state, dispatchID, retryAt, reason, detail, question, answer, review string
		var cancel bool
		if err := rows.Scan(&idx, &state, &attempts, &failures, &dispatchID, &readySeq, &retryAt, &reason, &detail,
			&question, &answer, &cancel, &review); err != nil {
			return fmt.Errorf("load tasks of run %s: %w", r.id, err)
		}
		if idx < 0 || idx >= len(r.tasks) {
			return fmt.Errorf("load tasks of run %s: task index %d is not in its plan", r.id, idx)
		}
		t := r.tasks[idx]
		if review != "" {
			v, err := decodeStoredReview(review)
			if err != nil {
				return fmt.Errorf("load task %s of run %s: %w", t.spec.ID, r.id, err)
			}
			t.own().vote = v
		}
		t.state, t.attempts, t.failures, t.dispatchID, t.readySeq = state, attempts, failures, dispatchID, readySeq
		t.cancel = cancel
		t.setQuestion(question)
		t.setAnswer(answer)
		t.setReason(settledReason(t.state, reason, detail))
		if retryAt != "" {
			at, _ := time.Parse(time.RFC3339Nano, retryAt)
			t.setRetryAt(at)
		}
		if t.state == lifecycle.TaskNeedsInput || t.answer != "" {
			t.setParent(t.dispatchID)
		}
		r.counts[state]++
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(r.tasks) {
		return fmt.Errorf("load tasks of run %s: %d task rows for %d tasks in its plan", r.id, n, len(r.tasks))
	}
	if r.usage, err = runUsage(ctx, db, r.id); err != nil {
		return err
	}
	for _, t := range r.tasks {
		if t.state == lifecycle.TaskSucceeded {
			for _, f := range slices.Backward(t.fixes) {
				if f.state == lifecycle.TaskSucceeded {
					t.own().product = f // the fix the loop succeeded with
					break
				}
			}
		}
		t.unmet = 0
		for _, d := range t.deps {
			if d.state != lifecycle.TaskSucceeded {
				t.unmet++
			}
		}
		if t.state != lifecycle.TaskRunning && t.answer != "" {
			// Answered but not running: the latest attempt asked (its answer is still to
			// fire), or it was the answer and failed (its retry answers the same question:
			// the one its parent asked).
			var parent, state string
			err := db.QueryRowContext(ctx, `SELECT parent_id, state FROM attempts WHERE dispatch_id = ?`, t.dispatchID).Scan(&parent, &state)
			if err != nil {
				return fmt.Errorf("load attempt %s of run %s: %w", t.dispatchID, r.id, err)
			}
			if state != lifecycle.TaskNeedsInput && parent != "" {
				t.setParent(parent)
			}
		}
		if t.state == lifecycle.TaskRunning {
			var parent string
			err := db.QueryRowContext(ctx, `SELECT parent_id FROM attempts WHERE dispatch_id = ?`, t.dispatchID).Scan(&parent)
			if err != nil {
				return fmt.Errorf("load attempt %s of run %s: %w", t.dispatchID, r.id, err)
			}
			t.setParent(parent)
		}
	}
	return nil
}

// resume re-attaches every attempt that was running: the executor finds its dispatch by id
// (or starts it, when the crash came before it was accepted).
func (e *Engine) resume(ctx context.Context) {
	for _, t := range e.reattach {
		a := e.attempt(t)
		if o := e.opts.Observer; o != nil {
			o.Reattached(a)
		}
		e.exec.Start(ctx, a, e.done)
	}
	e.reattach = nil
}
