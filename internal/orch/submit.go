package orch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// submit creates a run, or answers with the existing run of the same name and content.
func (e *Engine) submit(c submitCmd) {
	p := c.p
	digest := p.Digest()
	existing, existingDigest, err := e.runByName(p.Name)
	if err != nil {
		c.reply <- submitResult{err: err}
		return
	}
	if existing != "" {
		if existingDigest != digest {
			c.reply <- submitResult{err: fmt.Errorf("%w: a run named %q already exists with a different plan (%s); rename the plan to run it again",
				ErrConflict, p.Name, existingDigest)}
			return
		}
		c.reply <- submitResult{runID: existing}
		return
	}
	r := e.newRun(p, digest, c)
	e.runs[r.id], e.byName[r.name] = r, r
	e.b.newRuns = append(e.b.newRuns, r)
	e.record(r, nil, "orch.run.submitted", map[string]any{
		"plan_digest": digest, "tasks": int64(len(r.tasks)), "submitted_by": c.actor, "repo": r.repo, "revision": r.revision,
	})
	for _, t := range r.tasks {
		if t.unmet == 0 {
			e.becomeReady(t)
		}
	}
	reply := c.reply
	id := r.id
	e.b.replies = append(e.b.replies, func(err error) { reply <- submitResult{runID: id, created: err == nil, err: err} })
}

// runByName finds a run of that name in memory or, when sealed, in the database.
func (e *Engine) runByName(name string) (id, digest string, err error) {
	if r, ok := e.byName[name]; ok {
		return r.id, r.digest, nil
	}
	err = e.db.SQL().QueryRowContext(context.Background(), `SELECT id, digest FROM runs WHERE name = ?`, name).Scan(&id, &digest)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	return id, digest, err
}

// newRun builds the in-memory run of p: tasks, edges, unmet counts and lock requests.
func (e *Engine) newRun(p *plan.Plan, digest string, c submitCmd) *run {
	r := &run{
		id: e.newID(), name: p.Name, digest: digest, canonical: p.Canonical(), actor: c.actor,
		repo: c.repo, revision: c.revision, concurrency: p.Concurrency, createdAt: e.opts.Now().UTC(),
		state: api.RunRunning, counts: map[string]int{}, inserted: true,
	}
	e.buildTasks(r, p)
	return r
}

// buildTasks fills r.tasks from p, all pending.
func (e *Engine) buildTasks(r *run, p *plan.Plan) {
	resolved := p.Resolve()
	e.specs.Store(r.id, runSpecs{concurrency: p.Concurrency, tasks: resolved})
	r.tasks = make([]*task, len(resolved))
	r.byID = make(map[string]*task, len(resolved))
	for i, spec := range resolved {
		t := &task{run: r, idx: i, spec: spec, state: api.TaskPending, qidx: -1, timerIdx: -1}
		r.tasks[i] = t
		r.byID[spec.ID] = t
	}
	r.counts[api.TaskPending] = len(resolved)
	for _, t := range r.tasks {
		for _, d := range t.spec.Deps {
			dep := r.byID[d]
			t.deps = append(t.deps, dep)
			dep.dependents = append(dep.dependents, t)
		}
		t.unmet = len(t.deps)
		for _, l := range t.spec.Locks {
			t.locks = append(t.locks, lockReq{l: e.lock(l.Name), shared: l.Mode == "shared"})
		}
	}
}

// lock returns the named lock's state, creating it.
func (e *Engine) lock(name string) *lockState {
	l, ok := e.locks[name]
	if !ok {
		l = &lockState{name: name}
		e.locks[name] = l
	}
	return l
}
