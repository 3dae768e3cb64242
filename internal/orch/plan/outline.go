package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/verdict"
)

// Outline is the shape of one task of a stored plan: what a view of a run shows of its plan
// (the task, its subagent, what it waits for, the locks it takes and its verify gate),
// without its input, grants, retry policy or budget.
type Outline struct {
	ID       string
	Subagent string
	// Deps are depends_on, base and every needs.from, without duplicates, sorted (as [Resolved]).
	Deps []string
	// Needs are the tasks whose products this one takes (its needs' from), sorted, unique.
	Needs []string
	// Locks are the effective locks (as [Resolved]).
	Locks []Lock
	// Verify is the task's verify gate, its default timeout applied (as [Resolved]).
	Verify *verdict.Spec
	// Learn: the task says learn: true (docs/learn.md).
	Learn bool
}

// OutlineOf is the outline of resolved tasks.
func OutlineOf(tasks []Resolved) []Outline {
	out := make([]Outline, len(tasks))
	for i, r := range tasks {
		o := Outline{ID: r.ID, Subagent: r.Subagent, Deps: r.Deps, Locks: r.Locks, Verify: r.Verify, Learn: r.Learn}
		for _, n := range r.Needs {
			o.Needs = append(o.Needs, n.From)
		}
		slices.Sort(o.Needs)
		o.Needs = slices.Compact(o.Needs)
		if len(o.Deps) == 0 {
			o.Deps = nil
		}
		out[i] = o
	}
	return out
}

type outlineVerify struct {
	Command []string `json:"command"`
	Protect []string `json:"protect"`
	Changes []string `json:"changes"`
	Expect  *struct {
		JUnit    string `json:"junit"`
		MinTests int    `json:"min_tests"`
	} `json:"expect"`
	Timeout string `json:"timeout"`
}

func (v *outlineVerify) spec() (*verdict.Spec, error) {
	if v == nil {
		return nil, nil
	}
	s := verdict.Spec{Command: v.Command, Protect: v.Protect, Changes: v.Changes}
	if v.Expect != nil {
		s.Expect = &verdict.Expect{JUnit: v.Expect.JUnit, MinTests: v.Expect.MinTests}
	}
	if v.Timeout != "" {
		d, err := time.ParseDuration(v.Timeout)
		if err != nil {
			return nil, err
		}
		s.Timeout = d
	}
	s = s.Effective()
	return &s, nil
}

// ReadOutline reads the outline of every task, in plan order, from a plan's canonical form
// ([Plan.Canonical], as orch.db stores it). It decodes only those fields, so it takes a
// small fraction of what [Parse] does (which validates everything): a run view of a
// 100,000-task plan reads its shape in a few hundred milliseconds instead of seconds. A plan
// with a fan-out, whose tasks' shape follows from its template, is parsed and resolved
// whole instead. canonical is what this host's engine stored: it is not validated again; a
// document that is not a plan's canonical form is an error, never a panic.
func ReadOutline(canonical []byte) ([]Outline, error) {
	var doc struct {
		Defaults struct {
			Verify *outlineVerify `json:"verify"`
		} `json:"defaults"`
		Tasks []struct {
			ID        string   `json:"id"`
			Subagent  string   `json:"subagent"`
			DependsOn []string `json:"depends_on"`
			Base      []string `json:"base"`
			Needs     map[string]struct {
				From string `json:"from"`
			} `json:"needs"`
			Locks []struct {
				Mode string `json:"mode"`
				Name string `json:"name"`
			} `json:"locks"`
			Verify *outlineVerify   `json:"verify"`
			FanOut *json.RawMessage `json:"fan_out"`
			Learn  bool             `json:"learn"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(canonical, &doc); err != nil {
		return nil, fmt.Errorf("read a stored plan's outline: %w", err)
	}
	if len(doc.Tasks) > MaxTasks {
		return nil, fmt.Errorf("read a stored plan's outline: %d tasks, over %d", len(doc.Tasks), MaxTasks)
	}
	defaultVerify, err := doc.Defaults.Verify.spec()
	if err != nil {
		return nil, fmt.Errorf("read a stored plan's outline: defaults.verify: %w", err)
	}
	out := make([]Outline, len(doc.Tasks))
	for i, t := range doc.Tasks {
		if t.FanOut != nil {
			p, err := Parse("stored plan", canonical)
			if err != nil {
				return nil, fmt.Errorf("read a stored plan's outline: %w", err)
			}
			return OutlineOf(p.Resolve()), nil
		}
		o := Outline{ID: t.ID, Subagent: t.Subagent, Learn: t.Learn}
		for _, n := range t.Needs {
			o.Needs = append(o.Needs, n.From)
		}
		slices.Sort(o.Needs)
		o.Needs = slices.Compact(o.Needs)
		o.Deps = slices.Compact(slices.Sorted(slices.Values(append(append(slices.Clone(t.DependsOn), t.Base...), o.Needs...))))
		var locks []Lock
		for _, l := range t.Locks {
			locks = append(locks, Lock{Name: l.Name, Mode: l.Mode})
		}
		o.Locks = effectiveLocks(locks)
		if o.Verify, err = t.Verify.spec(); err != nil {
			return nil, fmt.Errorf("read a stored plan's outline: task %q: verify: %w", t.ID, err)
		}
		if o.Verify == nil && defaultVerify != nil {
			v := *defaultVerify
			o.Verify = &v
		}
		out[i] = o
	}
	return out, nil
}

// LockNames are locks as a view lists them: the name, with " (shared)" after a shared one.
func LockNames(locks []Lock) []string {
	var out []string
	for _, l := range locks {
		name := l.Name
		if l.Mode == LockShared {
			name += " (shared)"
		}
		out = append(out, name)
	}
	return out
}
