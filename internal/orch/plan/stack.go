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
	for k, b := range t.Base() {
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

// MaxStack caps the patches of one task's stack: the dispatch refuses a longer one at
// accept (internal/dispatch's maxStack, the same number).
const MaxStack = 256

// stackDepths refuses a task whose stack is certainly longer than MaxStack: its longest
// chain of bases (a base, its base, and so on) holds more tasks than that, and a stack
// holds every task of each such chain. So no plan whose stacks fit is refused, and a long
// chain is refused here rather than after its first 256 tasks ran; a stack over the cap
// only through many short chains is refused when the task's dispatch is accepted. Each
// task's depth is found once, without recursion; a cycle (reported by the graph check)
// adds nothing.
func (v *validator) stackDepths(p *Plan) {
	n := len(p.Tasks)
	ids := make(map[string]int, n)
	for i := range p.Tasks {
		ids[p.Tasks[i].ID] = i
	}
	depth := make([]int, n)   // the longest chain of bases below the task
	state := make([]uint8, n) // 0 not seen, 1 being walked, 2 done
	type frame struct{ i, next int }
	var walk []frame
	for root := range p.Tasks {
		if state[root] != 0 {
			continue
		}
		state[root] = 1
		walk = append(walk[:0], frame{i: root})
		for len(walk) > 0 {
			f := &walk[len(walk)-1]
			base := p.Tasks[f.i].Base()
			if f.next < len(base) {
				j, ok := ids[base[f.next]]
				f.next++
				if ok && state[j] == 0 {
					state[j] = 1
					walk = append(walk, frame{i: j})
				}
				continue
			}
			d := 0
			for _, b := range base {
				if j, ok := ids[b]; ok && state[j] == 2 {
					d = max(d, depth[j]+1)
				}
			}
			depth[f.i], state[f.i] = d, 2
			walk = walk[:len(walk)-1]
		}
	}
	deepest := func(base []string) (d int, from string) {
		for _, b := range base {
			if j, ok := ids[b]; ok && depth[j]+1 > d {
				d, from = depth[j]+1, b
			}
		}
		return d, from
	}
	report := func(path string, base []string) {
		d, from := deepest(base)
		end := from
		for {
			j := ids[end]
			_, next := deepest(p.Tasks[j].Base())
			if next == "" {
				break
			}
			end = next
		}
		v.add(path, "its stack holds at least %d patches: a chain of %d bases, from %q back to %q; a stack holds at most %d "+
			"(split the chain across runs: a later run's commit holds the earlier run's branch)", d, d, from, end, MaxStack)
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		// Only the first task past the cap on each chain: its dependents are past it too.
		if depth[i] == MaxStack+1 {
			report("tasks["+strconv.Itoa(i)+"].base", t.Base())
		}
		if fo := t.FanOut(); fo != nil {
			if d, _ := deepest(fo.Template.Base()); d > MaxStack {
				report("tasks["+strconv.Itoa(i)+"].fan_out.template.base", fo.Template.Base())
			}
		}
	}
}
