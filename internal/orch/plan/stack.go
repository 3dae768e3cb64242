package plan

import "strconv"

// Stacked tasks (docs/plan.md, "Stacked tasks"): a task with base starts from upstream work.
// Its workspace is the run's commit with each base task's approved patch applied (the
// product its dependents receive: its own, or the fix its loop succeeded with), and its own
// patch is taken against that tree, so a chain implement -> document -> migrate is three
// patches, each on top of the ones before it.

// StackKey is the input key a stacked task's bases' patches are mounted under, read-only:
// /agora/inputs/base/TASK/patch.diff, one per task of its stack. A stacked task may not use
// it for a need of its own.
const StackKey = "base"

// stackBases refuses a base agora cannot build on: a fan-out group (its items' patches
// are parallel work, each against the same tree, not one line of work) and a learn task (its
// products feed no other task; see learn.go, which reports that one).
func (v *validator) stackBases(tp string, t *Task, groups map[string]bool) {
	for k, b := range t.Base {
		if groups[b] {
			v.add(tp+".base["+strconv.Itoa(k)+"]", "task %q is a fan_out group: its items' patches are parallel work on one tree, "+
				"not one line of work to build on; stack on a task that gathers them (needs from %q, applying each patch) instead", b, b)
		}
	}
}

// StackOrder is the stack of a task whose base list is base: the tasks whose patches its
// workspace starts from, in the order they apply. For each base in the order written, that
// base's own stack comes first, then the base; each task once. So every patch comes after
// the patches it was made on. baseOf gives a task's own base list (ok false for a task not
// in the run, which is left out). It walks an explicit stack, never recursing: a plan may
// chain many tasks.
func StackOrder(base []string, baseOf func(id string) (base []string, ok bool)) []string {
	if len(base) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	type frame struct {
		id   string
		base []string
		next int // the next of base to visit
	}
	var walk []frame
	push := func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		if b, ok := baseOf(id); ok {
			walk = append(walk, frame{id: id, base: b})
		}
	}
	for _, b := range base {
		push(b)
		for len(walk) > 0 {
			f := &walk[len(walk)-1]
			if f.next < len(f.base) {
				f.next++
				push(f.base[f.next-1])
				continue
			}
			out = append(out, f.id)
			walk = walk[:len(walk)-1]
		}
	}
	return out
}
