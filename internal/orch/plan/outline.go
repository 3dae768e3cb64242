package plan

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Outline is the shape of one task of a stored plan: what a view of a run shows of its plan
// (the task, its subagent, what it waits for and the locks it takes), without its input,
// grants, retry policy or budget.
type Outline struct {
	ID       string
	Subagent string
	// Deps are depends_on and every needs.from, without duplicates, sorted (as [Resolved]).
	Deps []string
	// Needs are the tasks whose products this one takes (its needs' from), sorted, unique.
	Needs []string
	// Locks are the effective locks (as [Resolved]).
	Locks []Lock
}

// ReadOutline reads the outline of every task, in plan order, from a plan's canonical form
// ([Plan.Canonical], as orch.db stores it). It decodes only those fields, so it takes a
// fraction of what [Parse] does (which validates everything): a run view of a 100,000-task
// plan reads its shape in a few hundred milliseconds instead of seconds. canonical is what
// this host's engine stored: it is not validated again; a document that is not a plan's
// canonical form is an error, never a panic.
func ReadOutline(canonical []byte) ([]Outline, error) {
	var doc struct {
		Tasks []struct {
			ID        string   `json:"id"`
			Subagent  string   `json:"subagent"`
			DependsOn []string `json:"depends_on"`
			Needs     map[string]struct {
				From string `json:"from"`
			} `json:"needs"`
			Locks []struct {
				Mode string `json:"mode"`
				Name string `json:"name"`
			} `json:"locks"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(canonical, &doc); err != nil {
		return nil, fmt.Errorf("read a stored plan's outline: %w", err)
	}
	if len(doc.Tasks) > MaxTasks {
		return nil, fmt.Errorf("read a stored plan's outline: %d tasks, over %d", len(doc.Tasks), MaxTasks)
	}
	out := make([]Outline, len(doc.Tasks))
	for i, t := range doc.Tasks {
		o := Outline{ID: t.ID, Subagent: t.Subagent}
		for _, n := range t.Needs {
			o.Needs = append(o.Needs, n.From)
		}
		slices.Sort(o.Needs)
		o.Needs = slices.Compact(o.Needs)
		o.Deps = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(t.DependsOn), o.Needs...))))
		var locks []Lock
		for _, l := range t.Locks {
			locks = append(locks, Lock{Name: l.Name, Mode: l.Mode})
		}
		o.Locks = effectiveLocks(locks)
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
