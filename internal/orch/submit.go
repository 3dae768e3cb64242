package orch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/lifecycle"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// submit creates a run, or answers with the existing run of the same identity: name, plan
// digest, the versions its bare subagent names were pinned to, workspace, repository and
// commit. The same name on anything else is a new run, and so is a submission that asks for
// one (newRun); the submission entry then says why, naming the run like it.
func (e *Engine) submit(c submitCmd) {
	// c lives until the reply at the end; the plan it carries need not: once resolved into
	// the run's specs, its tasks (hundreds of bytes each) and its source are garbage while
	// the run's nodes are built beside them.
	p := c.p
	c.p = nil
	// Before the digest and the run's tasks, not after: they are most of what the run will
	// keep and several times more for a moment, and under a limit made for the tasks held
	// before them the collector runs back to back for as long as they take (seconds at
	// 100,000 tasks). The next flush tells the count held, whichever way this goes.
	e.tellHeldAhead(len(p.Tasks))
	canonical := p.Canonical()
	digest := plan.DigestOf(canonical)
	pins, err := pinsJSON(c.subagents)
	if err != nil {
		c.reply <- submitResult{err: err}
		return
	}
	var existing, why string
	var like likeRun
	switch {
	case c.slot != nil:
		existing, err = e.runByID(c.slot.RunID())
	default:
		if like, err = e.newestLike(p.Name, digest, c.workspace, c.repo, c.revision, &pins); err == nil && like.id != "" {
			existing = like.id
			if c.newRun {
				why, existing = "a new run was asked for; run "+like.id+" has the same plan, subagents and commit", ""
			}
		} else if err == nil {
			// None with these pins: a run of the plan before its subagents changed says why.
			if like, err = e.newestLike(p.Name, digest, c.workspace, c.repo, c.revision, nil); err == nil && like.id != "" {
				why = "subagent versions changed since run " + like.id + ": " + pinsChange(like.pins, c.subagents)
			}
			if c.newRun && why == "" {
				why = "a new run was asked for"
			}
		}
	}
	if err != nil {
		c.reply <- submitResult{err: err}
		return
	}
	if existing != "" {
		c.reply <- submitResult{runID: existing}
		return
	}
	r := e.newRun(p, canonical, digest, c)
	r.pins, r.subagents = pins, c.subagents
	e.runs[r.id], e.byName[r.name] = r, r
	e.b.newRuns = append(e.b.newRuns, r)
	details := map[string]any{
		entry.KeyPlanDigest: digest, entry.KeyTasks: int64(len(r.tasks)), "submitted_by": c.actor, "workspace": r.workspace, entry.KeyRepo: r.repo, "revision": r.revision,
	}
	if len(c.subagents) > 0 {
		// Only with pins, so a run whose plan pins every version is recorded as before.
		sub := make(map[string]any, len(c.subagents))
		for k, v := range c.subagents {
			sub[k] = v
		}
		details["subagents"] = sub
	}
	if why != "" {
		// Before the run's first effect, in the entry that makes it: why it is not the run
		// of the same name, plan and checkout that exists.
		details["new_run"] = why
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
	e.b.replies = append(e.b.replies, func(err error) { reply <- submitResult{runID: id, created: err == nil, why: why, err: err} })
}

// likeRun is a run of a submission's name, plan and checkout, and the pins it was made with.
type likeRun struct{ id, pins string }

// newestLike finds the newest run of that name, plan digest and checkout, with exactly
// those pins (pins nil: any), in memory (a run of this batch is not committed yet) or in
// the database.
func (e *Engine) newestLike(name, digest, workspace, repo, revision string, pins *string) (likeRun, error) {
	var found *run
	for _, r := range e.runs {
		if !r.inserted || r.name != name || r.digest != digest || r.workspace != workspace || r.repo != repo || r.revision != revision ||
			(pins != nil && r.pins != *pins) {
			continue
		}
		if found == nil || r.createdAt.After(found.createdAt) || (r.createdAt.Equal(found.createdAt) && r.id > found.id) {
			found = r
		}
	}
	if found != nil {
		return likeRun{id: found.id, pins: found.pins}, nil
	}
	q := `SELECT id, subagents FROM runs WHERE name = ? AND digest = ? AND workspace = ? AND repo = ? AND revision = ?`
	args := []any{name, digest, workspace, repo, revision}
	if pins != nil {
		q += ` AND subagents = ?`
		args = append(args, *pins)
	}
	var l likeRun
	err := e.db.SQL().QueryRowContext(context.Background(), q+` ORDER BY created_at DESC, id DESC LIMIT 1`, args...).Scan(&l.id, &l.pins)
	if errors.Is(err, sql.ErrNoRows) {
		return likeRun{}, nil
	}
	return l, err
}

// pinsJSON is the canonical JSON of a run's pins ({"NAME": "NAME@sha256:HEX"}), "" for none:
// a run whose plan pins every version has the identity it had before pins existed.
func pinsJSON(pins map[string]string) (string, error) {
	if len(pins) == 0 {
		return "", nil
	}
	m := make(map[string]any, len(pins))
	for k, v := range pins {
		m[k] = v
	}
	b, err := jcs.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("the plan's subagent versions: %w", err)
	}
	return string(b), nil
}

// pinsChange says which pins differ between an earlier run's (its canonical JSON) and now's.
func pinsChange(before string, now map[string]string) string {
	old := map[string]string{}
	if before != "" {
		_ = json.Unmarshal([]byte(before), &old)
	}
	var changes []string
	for _, name := range slices.Sorted(maps.Keys(now)) {
		switch was := old[name]; {
		case was == "":
			changes = append(changes, name+" is now "+now[name]+" (the earlier run did not record its version)")
		case was != now[name]:
			changes = append(changes, name+" was "+was+", is "+now[name])
		}
	}
	if len(changes) == 0 {
		return "the earlier run pinned versions this one does not"
	}
	return strings.Join(changes, "; ")
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
func (e *Engine) newRun(p *plan.Plan, canonical []byte, digest string, c submitCmd) *run {
	r := &run{
		id: e.newID(), name: p.Name, digest: digest, canonical: canonical, actor: c.actor,
		repo: c.repo, revision: c.revision, workspace: c.workspace, trace: c.trace, concurrency: p.Concurrency, createdAt: e.opts.Now().UTC(),
		state: lifecycle.RunRunning, counts: map[string]int{}, inserted: true,
	}
	if c.slot != nil {
		r.id, r.slot = c.slot.RunID(), *c.slot
		r.slot.At = r.slot.At.UTC()
	}
	e.buildTasks(r, p)
	return r
}

// buildTasks fills r.tasks from p, all pending. p is not used after its resolution, so a
// plan no caller holds is garbage while the nodes are built. The nodes, their dependency and dependent
// lists and their lock requests are cut from one allocation each, sized by a first pass over
// the specs: a run of 100,000 tasks makes a handful of objects for its graph instead of
// half a million, each list its exact length. Every list is capped at its length, so an
// extension that appends to one (extend.go) moves it out of the shared array.
func (e *Engine) buildTasks(r *run, p *plan.Plan) {
	concurrency, queue := p.Concurrency, p.QueueName()
	r.budget = p.Budget
	r.q = e.queueOf(queue)
	resolved := p.Resolve()
	specs := make([]*plan.Resolved, len(resolved))
	nodes := make([]task, len(resolved))
	r.tasks = make([]*task, len(resolved))
	byID := make(map[string]*task, len(resolved)) // the index the graph is built with; r.task makes its own when needed
	edges, locks := 0, 0
	for i := range resolved {
		spec := &resolved[i]
		specs[i] = spec
		t := &nodes[i]
		*t = task{run: r, idx: i, spec: spec, state: lifecycle.TaskPending, qidx: -1, timerIdx: -1, ext: noExt, rare: noRare}
		r.tasks[i] = t
		byID[spec.ID] = t
		edges += len(spec.Deps)
		locks += len(spec.Locks)
	}
	e.specs.Store(r.id, runSpecs{concurrency: concurrency, tasks: specs, budget: r.budget, queue: queue})
	r.counts[lifecycle.TaskPending] = len(resolved)
	// How many dependents each task has, then each one's share of the dependents' array.
	dependents := make([]int32, len(resolved))
	for _, t := range r.tasks {
		for _, d := range t.spec.Deps {
			dependents[byID[d].idx]++
		}
	}
	depArr, dependentArr, lockArr := make([]*task, 0, edges), make([]*task, edges), make([]lockReq, 0, locks)
	at := 0
	for i, t := range r.tasks {
		if n := int(dependents[i]); n > 0 {
			t.dependents = dependentArr[at : at : at+n]
			at += n
		}
	}
	for _, t := range r.tasks {
		from := len(depArr)
		for _, d := range t.spec.Deps {
			dep := byID[d]
			depArr = append(depArr, dep)
			dep.dependents = append(dep.dependents, t)
		}
		if len(depArr) > from {
			t.deps = depArr[from:len(depArr):len(depArr)]
		}
		t.unmet = int32(len(t.deps))
		from = len(lockArr)
		for _, l := range t.spec.Locks {
			lockArr = append(lockArr, lockReq{l: e.lock(l.Name), shared: l.Mode == "shared"})
		}
		if len(lockArr) > from {
			t.locks = lockArr[from:len(lockArr):len(lockArr)]
		}
		if f := t.spec.FanOut; f != nil {
			producer := byID[f.From]
			links := producer.own()
			links.fanOuts = append(links.fanOuts, t)
		}
	}
	r.planTasks = len(r.tasks)
	e.held += len(r.tasks)
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
