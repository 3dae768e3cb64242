package orch

import (
	"container/heap"
	"slices"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// An `orch retry` takes back the skips the retried task's end caused: each transitive
// dependent skipped because of it becomes pending again, unless another dependency that
// failed, was cancelled or is skipped still holds it. That is a cascade in reverse (the
// retried root of 100,000 tasks unskips 99,999), bounded the same way (cascade.go): a batch
// unskips at most cascadeBatch tasks and the rest goes on in the next batches, before their
// events.
//
// The dependents are taken in an order where each comes after its dependencies
// (unskipOrder), and a task is unskipped only when none of its dependencies is dead, so one
// is taken back only after everything it waits for was. No pending task ever waits on a
// skipped one, which load reads as a skip cascade cut short.
//
// An unskip cut short by the bound is noted in orch.db (run_unskips: its run and its root)
// in the batch that cuts it, and the note is removed in the batch that ends it. After a
// crash, load goes on with each noted unskip from its root (resumeUnskips), and its entries
// still name the task whose retry caused them. A root retried again while its unskip waits
// has a second unskip, its own walk from the tasks skipped then; the note stays until the
// last ends.
type unskip struct {
	root  *task
	order []*task // root's transitive dependents to look at, each after its dependencies
	next  int     // the first of order not yet looked at
}

// unskipNote adds (or, with drop, removes) an unskip's row in run_unskips at commit.
type unskipNote struct {
	run  string
	idx  int
	drop bool
}

// unskipRoots is what the engine keeps of the unskips under way, by root: how many go on
// (a root retried again while its unskip waits has two, each its own walk), and whether
// run_unskips notes the root. The note is removed when the last of them ends.
type unskipRoots struct {
	going map[*task]int
	noted map[*task]bool
}

// unskipDependents takes back the skips t's end caused, t retried: in this batch, or in the
// next ones past cascadeBatch.
func (e *Engine) unskipDependents(t *task) {
	// Only what t's end skipped: the walk goes through skipped tasks alone. A dependent
	// reached past a task that failed or was cancelled itself was skipped because of that
	// one, and its own retry takes it back.
	e.unskipOn(e.startUnskip(t, func(d *task) bool { return d.state == lifecycle.TaskSkipped }))
}

// startUnskip counts an unskip from root going through the tasks through admits, and
// returns it.
func (e *Engine) startUnskip(root *task, through func(*task) bool) unskip {
	if e.unskipping.going == nil {
		e.unskipping = unskipRoots{going: map[*task]int{}, noted: map[*task]bool{}}
	}
	e.unskipping.going[root]++
	return unskip{root: root, order: unskipOrder(root, through)}
}

// unskipOn goes on with u until its order is done or the batch has swept cascadeBatch tasks;
// then u waits in e.unskips.
func (e *Engine) unskipOn(u unskip) {
	r := u.root.run
	// A cancelled run fires nothing again: what is still skipped stays so.
	for ; u.next < len(u.order) && !r.cancelRequested; u.next++ {
		if e.b.swept >= cascadeBatch {
			r.cascading++
			if !e.unskipping.noted[u.root] {
				e.unskipping.noted[u.root] = true
				e.b.unskipNotes = append(e.b.unskipNotes, unskipNote{run: r.id, idx: u.root.idx})
			}
			e.unskips = append(e.unskips, u)
			return
		}
		d := u.order[u.next]
		if d.state != lifecycle.TaskSkipped || heldByDead(d) {
			continue
		}
		d.setReason("", "")
		d.unmet = 0
		for _, x := range d.deps {
			if x.state != lifecycle.TaskSucceeded {
				d.unmet++
			}
		}
		e.set(d, lifecycle.TaskPending)
		e.record(r, d, entry.TaskUnskipped, map[string]any{"because": u.root.spec.ID})
		e.b.swept++
		if d.unmet == 0 {
			// Its dependencies all succeeded while it waited in a later batch.
			e.becomeReady(d)
		}
	}
	if e.unskipping.going[u.root]--; e.unskipping.going[u.root] > 0 {
		return
	}
	delete(e.unskipping.going, u.root)
	if e.unskipping.noted[u.root] {
		delete(e.unskipping.noted, u.root)
		e.b.unskipNotes = append(e.b.unskipNotes, unskipNote{run: r.id, idx: u.root.idx, drop: true})
	}
}

// heldByDead says whether a dependency of t failed, was cancelled or is skipped.
func heldByDead(t *task) bool {
	for _, x := range t.deps {
		switch x.state {
		case lifecycle.TaskFailed, lifecycle.TaskCancelled, lifecycle.TaskSkipped:
			return true
		}
	}
	return false
}

// resumeUnskips queues the unskips orch.db notes for r (the positions of their roots),
// each from its root again. The tasks one took back before the crash are no longer skipped,
// so its walk goes through every task that is skipped or not dead (those it took back may
// have run since), but never through the root of another unskip noted in r: what lies past
// that one is that one's to take back, as it would have been without the crash.
func (e *Engine) resumeUnskips(r *run, roots []int) {
	noted := map[*task]bool{}
	for _, idx := range roots {
		noted[r.tasks[idx]] = true
	}
	for _, idx := range roots {
		root := r.tasks[idx]
		through := func(d *task) bool {
			switch {
			case noted[d]:
				return false
			case d.state == lifecycle.TaskFailed, d.state == lifecycle.TaskCancelled:
				return false
			}
			return true
		}
		r.cascading++
		e.unskips = append(e.unskips, e.startUnskip(root, through))
		e.unskipping.noted[root] = true
	}
}

// unskipOrder is root's transitive dependents reached through tasks for which through is
// true (only those are in it), each after its dependencies among them, the lowest position
// in the run first where the order leaves a choice (so the plan's order wherever that is
// one). The links a run adds (a fan-out's items, which its consumer waits for and which come
// after it in the run) are dependencies like any other here.
func unskipOrder(root *task, through func(*task) bool) []*task {
	r := root.run
	const outside = -1
	// waiting[i]: how many dependencies of task i in the set are not yet in the order;
	// outside for a task not in the set.
	waiting := make([]int32, len(r.tasks))
	for i := range waiting {
		waiting[i] = outside
	}
	var set []*task
	stack := slices.Clone(root.dependents)
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if d == root || waiting[d.idx] != outside {
			continue
		}
		if !through(d) {
			continue
		}
		waiting[d.idx] = 0
		set = append(set, d)
		stack = append(stack, d.dependents...)
	}
	for _, d := range set {
		for _, x := range d.deps {
			if x != root && waiting[x.idx] != outside {
				waiting[d.idx]++
			}
		}
	}
	var next byIdx
	for _, d := range set {
		if waiting[d.idx] == 0 {
			next = append(next, d)
		}
	}
	heap.Init(&next)
	order := make([]*task, 0, len(set))
	for next.Len() > 0 {
		d := heap.Pop(&next).(*task)
		order = append(order, d)
		for _, x := range d.dependents {
			if x == root || waiting[x.idx] == outside {
				continue
			}
			if waiting[x.idx]--; waiting[x.idx] == 0 {
				heap.Push(&next, x)
			}
		}
	}
	// A cycle (which validate and the engine's links never make) would leave tasks out:
	// they stay skipped, as a task held by a dead dependency does.
	return order
}

// byIdx is a heap of tasks, the lowest position first.
type byIdx []*task

func (h byIdx) Len() int           { return len(h) }
func (h byIdx) Less(i, j int) bool { return h[i].idx < h[j].idx }
func (h byIdx) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byIdx) Push(x any)        { *h = append(*h, x.(*task)) }
func (h *byIdx) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
