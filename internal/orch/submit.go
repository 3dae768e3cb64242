package orch

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// submit creates a run, or answers with the existing run of the same identity: name, plan
// digest, workspace, repository and commit. The same name on anything else is a new run.
func (e *Engine) submit(c submitCmd) {
	p := c.p
	digest := p.Digest()
	var existing string
	var err error
	if c.slot != nil {
		existing, err = e.runByID(c.slot.RunID())
	} else {
		existing, err = e.runByIdentity(p.Name, digest, c.workspace, c.repo, c.revision)
	}
	if err != nil {
		c.reply <- submitResult{err: err}
		return
	}
	if existing != "" {
		c.reply <- submitResult{runID: existing}
		return
	}
	r := e.newRun(p, digest, c)
	e.runs[r.id], e.byName[r.name] = r, r
	e.b.newRuns = append(e.b.newRuns, r)
	details := map[string]any{
		entry.KeyPlanDigest: digest, entry.KeyTasks: int64(len(r.tasks)), "submitted_by": c.actor, "workspace": r.workspace, entry.KeyRepo: r.repo, "revision": r.revision,
	}
	if r.trace.ID != "" {
		// Only with a trace, so a run without one is recorded exactly as before.
		details[entry.KeyTraceID], details[entry.KeyTraceSpan], details[entry.KeyTraceParent] = r.trace.ID, r.trace.Span, r.trace.Parent
	}
	slotDetails(c.slot, details)
	e.record(r, nil, entry.RunSubmitted, details)
	for _, t := range r.tasks {
		if t.unmet == 0 {
			e.becomeReady(t)
		}
	}
	reply := c.reply
	id := r.id
	e.b.replies = append(e.b.replies, func(err error) { reply <- submitResult{runID: id, created: err == nil, err: err} })
}

// runByIdentity finds the newest run of that identity, in memory (a run of this batch is not
// committed yet) or in the database.
func (e *Engine) runByIdentity(name, digest, workspace, repo, revision string) (string, error) {
	for _, r := range e.runs {
		if r.name == name && r.digest == digest && r.workspace == workspace && r.repo == repo && r.revision == revision {
			return r.id, nil
		}
	}
	var id string
	err := e.db.SQL().QueryRowContext(context.Background(), `SELECT id FROM runs
		WHERE name = ? AND digest = ? AND workspace = ? AND repo = ? AND revision = ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, name, digest, workspace, repo, revision).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// runRef finds the unsealed run ref names: an id, or a name, which means its newest run.
// ok is false when that run is sealed or there is none.
func (e *Engine) runRef(ref string) (*run, bool) {
	if r, ok := e.runs[ref]; ok {
		return r, true
	}
	var id string
	err := e.db.SQL().QueryRowContext(context.Background(), `SELECT id FROM runs WHERE name = ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, ref).Scan(&id)
	if err == nil {
		if r, ok := e.runs[id]; ok {
			return r, true
		}
		if r, ok := e.byName[ref]; ok && r.createdAt.After(e.createdAtOf(id)) {
			return r, true // submitted in this batch, newer than the committed one
		}
		return nil, false
	}
	r, ok := e.byName[ref]
	return r, ok
}

// createdAtOf is when the committed run id was created, zero when unknown.
func (e *Engine) createdAtOf(id string) time.Time {
	var at string
	if e.db.SQL().QueryRowContext(context.Background(), `SELECT created_at FROM runs WHERE id = ?`, id).Scan(&at) != nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, at)
	return t
}

// newRun builds the in-memory run of p: tasks, edges, unmet counts and lock requests.
func (e *Engine) newRun(p *plan.Plan, digest string, c submitCmd) *run {
	r := &run{
		id: e.newID(), name: p.Name, digest: digest, canonical: p.Canonical(), actor: c.actor,
		repo: c.repo, revision: c.revision, workspace: c.workspace, trace: c.trace, concurrency: p.Concurrency, createdAt: e.opts.Now().UTC(),
		state: api.RunRunning, counts: map[string]int{}, inserted: true,
	}
	if c.slot != nil {
		r.id, r.slot = c.slot.RunID(), *c.slot
		r.slot.At = r.slot.At.UTC()
	}
	e.buildTasks(r, p)
	return r
}

// buildTasks fills r.tasks from p, all pending.
func (e *Engine) buildTasks(r *run, p *plan.Plan) {
	resolved := p.Resolve()
	r.budget = p.Budget
	r.q = e.queueOf(p.QueueName())
	e.specs.Store(r.id, runSpecs{concurrency: p.Concurrency, tasks: resolved, budget: p.Budget, queue: p.QueueName()})
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
		if f := t.spec.FanOut; f != nil {
			producer := r.byID[f.From]
			producer.fanOuts = append(producer.fanOuts, t)
		}
	}
	r.planTasks = len(r.tasks)
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
