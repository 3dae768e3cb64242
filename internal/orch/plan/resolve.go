package plan

import (
	"cmp"
	"encoding/json"
	"github.com/agora-dev/agora/internal/budget"
	"maps"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/verdict"
)

// Resolved is a task with the plan's defaults applied: what the engine stores and runs. An
// open run keeps one per task, so the fields most tasks leave empty sit behind one pointer
// ([Rare]), shared by every task that sets none of them: a Resolved is 176 bytes, not 264,
// with 9 pointers for the collector to follow, not 15.
type Resolved struct {
	ID       string
	Subagent string
	Target   string   // "" means the target agora.yaml names as default
	Env      []string // never nil
	Input    json.RawMessage
	Deps     []string      // depends_on, base and every needs.from, without duplicates, sorted
	Locks    []Lock        // one per name, exclusive when listed in both modes, sorted by name
	Retry    *Retry        // the effective policy, every field set; shared by the tasks that set none, never written
	Timeout  time.Duration // 0 when neither the task nor the defaults set one: the target's own
	Learn    bool          // a learn task: its dispatches are learn dispatches (docs/learn.md)
	// Rare holds the fields few tasks set. Never nil in a Resolved the plan or the engine
	// made ([NoRare] when the task sets none of them), and never written: a Resolved that
	// needs other values gets its own (see [WithRare]).
	*Rare
}

// Rare is the part of a [Resolved] that few tasks set.
type Rare struct {
	// Base is the task's base list as written ([Task.Base]): the run's engine walks it,
	// transitively, into the patches the task's workspace starts from. Reviewers and fixes of
	// a stacked task take its Base, so they work on the same tree.
	Base   []string
	Needs  map[string]Need
	Grants *grant.Set    // the task's narrowing, or nil
	Budget budget.Budget // the task's narrowing of each attempt's budget; zero: none
	// Verify is the task's verify gate (its own, else the defaults'), with its timeout
	// resolved; nil: none.
	Verify *verdict.Spec
	// FanOut is set on a fan-out task, which runs nothing itself: its Deps are its producer
	// and its template's dependencies, and every other field is empty.
	FanOut *ResolvedFanOut
	Review *Review // nil: no review
	OnFail *OnFail // nil: a red verdict fails the task
}

// NoRare is the [Rare] of every Resolved that sets none of its fields. It is never written.
var NoRare = &Rare{}

// WithRare is r, shared when it sets nothing ([NoRare]), else its own copy.
func WithRare(r Rare) *Rare {
	if r.isZero() {
		return NoRare
	}
	return &r
}

func (r *Rare) isZero() bool {
	return r.Base == nil && r.Needs == nil && r.Grants == nil && r.Budget.IsZero() && r.Verify == nil &&
		r.FanOut == nil && r.Review == nil && r.OnFail == nil
}

// Resolve applies the defaults to every task, in plan order. Fields a task sets win; retry
// merges field by field (built-in policy, then defaults.retry, then the task's retry).
func (p *Plan) Resolve() []Resolved {
	out := make([]Resolved, len(p.Tasks))
	// The tasks that set no retry of their own share one policy, as they share the defaults'
	// env: a policy is 40 bytes, a pointer 8.
	policy := DefaultRetry().with(p.Defaults.Retry)
	base := &policy
	// The tasks that inherit the defaults' env share one copy of it (never written, as
	// nothing of a Resolved is), not one each.
	env := slices.Clip(append([]string{}, p.Defaults.Env...))
	l := newLists(p.Tasks)
	for i := range p.Tasks {
		t := &p.Tasks[i]
		if t.FanOut() != nil {
			out[i] = p.resolveFanOut(t, base, env, l)
			continue
		}
		out[i] = p.resolveTask(t, base, env, l)
	}
	return out
}

// lists holds the resolved tasks' Deps and Locks, one array each for the whole plan: a plan
// of 100,000 tasks makes two objects for them instead of 200,000 small ones, which every
// collection of the engine that keeps them while the run is open would mark one by one. Each
// task's list is capped at its length, so an append to one never writes into the next.
type lists struct {
	deps  []string
	locks []Lock
}

// newLists sizes the arrays for tasks: an array that turns out too small grows, and the lists
// cut from it before stay where they are.
func newLists(tasks []Task) *lists {
	var deps, locks int
	for i := range tasks {
		t := &tasks[i]
		deps += len(t.DependsOn) + len(t.Base()) + len(t.Needs())
		locks += len(t.Locks)
	}
	return &lists{deps: make([]string, 0, deps), locks: make([]Lock, 0, locks)}
}

// depsOf is t's depends_on, base and every needs.from, without duplicates, sorted: never nil.
func (l *lists) depsOf(t *Task) []string {
	from := len(l.deps)
	l.deps = append(l.deps, t.DependsOn...)
	l.deps = append(l.deps, t.Base()...)
	for _, n := range t.Needs() {
		l.deps = append(l.deps, n.From)
	}
	slices.Sort(l.deps[from:])
	l.deps = l.deps[:from+len(slices.Compact(l.deps[from:]))]
	return l.deps[from:len(l.deps):len(l.deps)]
}

// locksOf is [effectiveLocks] of locks, cut from l's array.
func (l *lists) locksOf(locks []Lock) []Lock {
	if len(locks) == 0 {
		return nil
	}
	from := len(l.locks)
	l.locks = append(l.locks, locks...)
	l.locks = l.locks[:from+len(sortLocks(l.locks[from:]))]
	return l.locks[from:len(l.locks):len(l.locks)]
}

// cloneVerify is v with its default timeout applied, sharing nothing with the plan.
func cloneVerify(v *verdict.Spec) *verdict.Spec {
	c := v.Effective().Clone()
	return &c
}

// resolveTask is t with the defaults applied; env is the defaults' env, copied, which a task
// without its own shares. Its Deps and Locks are cut from l.
func (p *Plan) resolveTask(t *Task, base *Retry, env []string, l *lists) Resolved {
	r := Resolved{
		ID:       t.ID,
		Subagent: t.Subagent,
		Target:   t.Target,
		Env:      t.Env,
		Input:    t.Input,
		Deps:     l.depsOf(t),
		Locks:    l.locksOf(t.Locks),
		Retry:    base,
		Timeout:  t.Timeout(),
		Learn:    t.Learn(),
	}
	rare := Rare{
		Base:   slices.Clone(t.Base()),
		Needs:  maps.Clone(t.Needs()),
		Grants: t.Grants(),
		Budget: t.Budget(),
		Review: t.Review(),
		OnFail: t.OnFail(),
	}
	r.Target = cmp.Or(r.Target, p.Defaults.Target)
	if t.Retry() != nil {
		own := base.with(t.Retry())
		r.Retry = &own
	}
	if r.Env == nil {
		r.Env = env
	} else {
		r.Env = append([]string{}, r.Env...)
	}
	r.Timeout = cmp.Or(r.Timeout, p.Defaults.Timeout)
	if v := t.Verify(); v != nil {
		rare.Verify = cloneVerify(v)
	} else if v := p.Defaults.Verify; v != nil {
		rare.Verify = cloneVerify(v)
	}
	r.Rare = WithRare(rare)
	return r
}

// effectiveLocks is one lock per name, exclusive when listed in both modes, sorted by name;
// nil for none. locks is not written.
func effectiveLocks(locks []Lock) []Lock {
	if len(locks) == 0 {
		return nil
	}
	return sortLocks(slices.Clone(locks))
}

// sortLocks sorts locks in place to [effectiveLocks]'s order and returns the prefix that
// keeps one lock per name.
func sortLocks(out []Lock) []Lock {
	// Sorting by name, exclusive first, keeps the exclusive entry of a name when compacting.
	slices.SortFunc(out, func(a, b Lock) int {
		if a.Name != b.Name {
			if a.Name < b.Name {
				return -1
			}
			return 1
		}
		return rank(a.Mode) - rank(b.Mode)
	})
	return slices.CompactFunc(out, func(a, b Lock) bool { return a.Name == b.Name })
}

func rank(mode string) int {
	if mode == LockExclusive {
		return 0
	}
	return 1
}
