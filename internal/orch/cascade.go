package orch

import (
	"slices"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// A task that fails or is cancelled skips every transitive dependent that has not run, and a
// run's cancel cancels every task of it that has not ended. In a large run that is most of it
// (the first of 100,000 tasks failing skips 99,712), and each is an audit entry, an event and
// a row image the batch holds until it commits: one batch of them all held 290 MB. So a batch
// skips or cancels at most cascadeBatch tasks this way, and what is left goes on in the next
// batches, before their events (the loop waits for no event while one waits). The run is
// not settled meanwhile (run.cascading).
//
// The dependents a cascade has still to skip are pending: each waits for the task the
// cascade skipped or ended before it, which never succeeds now, so none can be scheduled in
// between; the tasks of a run whose cancel goes on are never fired (tryStart). A crash between
// the batches leaves such tasks pending in orch.db; load finds them (a pending task with a
// dependency that failed, was cancelled or was skipped, which no finished cascade leaves and
// no retry makes; a task not ended, or running with its dispatch not told, in a run whose
// cancel was asked) and goes on (resumeCascades).
const cascadeBatch = 2048

// cascade is a skip cascade to go on with: root ended in state, and stack holds the tasks to
// look at next.
type cascade struct {
	root  *task
	state string
	stack []*task
}

// skipDependents marks every transitive dependent of t that has not run `skipped`, naming t
// and the state it ended in (failed or cancelled): in this batch, or in the next ones past
// cascadeBatch.
func (e *Engine) skipDependents(t *task, ancestorState string) {
	e.skip(cascade{root: t, state: ancestorState, stack: slices.Clone(t.dependents)})
}

// skip goes on with c until its stack is empty or the batch has skipped cascadeBatch tasks;
// then c waits in e.cascades.
func (e *Engine) skip(c cascade) {
	reason, detail := lifecycle.AncestorReason(c.state), "task "+c.root.spec.ID+" "+c.state
	for len(c.stack) > 0 {
		if e.b.swept >= cascadeBatch {
			c.root.run.cascading++
			e.cascades = append(e.cascades, c)
			return
		}
		d := c.stack[len(c.stack)-1]
		c.stack = c.stack[:len(c.stack)-1]
		if d.state != lifecycle.TaskPending && d.state != lifecycle.TaskReady {
			continue
		}
		unqueue(d)
		e.stopTimer(d)
		d.setReason(reason, detail)
		e.set(d, lifecycle.TaskSkipped)
		e.record(d.run, d, entry.TaskSkipped, map[string]any{entry.KeyAncestor: c.root.spec.ID, entry.KeyWhy: c.state})
		e.b.swept++
		c.stack = append(c.stack, d.dependents...)
	}
}

// cancelling is a run's cancel to go on with: its tasks from next on.
type cancelling struct {
	r    *run
	next int
}

// cancelTasks cancels c's run's tasks from c.next on until the batch has taken cascadeBatch
// tasks this way; then c waits in e.cancelling.
func (e *Engine) cancelTasks(c cancelling) {
	for ; c.next < len(c.r.tasks); c.next++ {
		if e.b.swept >= cascadeBatch {
			c.r.cascading++
			e.cancelling = append(e.cancelling, c)
			return
		}
		x := c.r.tasks[c.next]
		switch x.state {
		case lifecycle.TaskPending, lifecycle.TaskReady, lifecycle.TaskNeedsInput:
			e.b.swept++ // an entry; a running task's cancel is its dispatch's
		}
		e.cancelTask(x)
	}
}

// sweeping says whether a cascade, a run's cancel or an unskip waits for the next batch.
func (e *Engine) sweeping() bool {
	return len(e.cascades) > 0 || len(e.cancelling) > 0 || len(e.unskips) > 0
}

// continueCascades goes on with the cascades, cancels and unskips earlier batches left, in this
// batch, and settles each run whose waiting work it finished. A cascade whose root no longer
// stands as it ended (`orch retry` took it back) is dropped: the tasks it had still to skip
// wait for the root again, as they did before it ended, unless another dead dependency holds
// them (reroot).
func (e *Engine) continueCascades() {
	cascades, cancels := e.cascades, e.cancelling
	e.cascades, e.cancelling = nil, nil
	for _, c := range cancels {
		c.r.cascading--
		e.cancelTasks(c)
		if c.r.cascading == 0 {
			e.settle(c.r)
		}
	}
	for _, c := range cascades {
		r := c.root.run
		r.cascading--
		if c.root.state == c.state {
			e.skip(c)
		} else {
			e.reroot(c)
		}
		if r.cascading == 0 {
			e.settle(r)
		}
	}
	unskips := e.unskips
	e.unskips = nil
	for _, u := range unskips {
		r := u.root.run
		r.cascading--
		e.unskipOn(u)
		if r.cascading == 0 {
			e.settle(r)
		}
	}
}

// reroot goes on with what a dropped cascade had still to look at: a task there that a
// dead dependency still holds (a second failure may keep one the retry left skipped) is
// skipped as load would skip it; the others wait for the retried root.
func (e *Engine) reroot(c cascade) {
	eachHeld(c.stack, func(t, root *task) { e.skip(cascade{root: root, state: root.state, stack: []*task{t}}) })
}

// resumeCascades queues what a crash cut short in r (see cascadeBatch): the cancel of a run
// whose cancel was asked and which has a task not ended and not told, or else the cascade of
// each pending or ready task a dead dependency holds.
func (e *Engine) resumeCascades(r *run) {
	if r.cancelRequested {
		for _, t := range r.tasks {
			switch {
			case t.state == lifecycle.TaskPending, t.state == lifecycle.TaskReady, t.state == lifecycle.TaskNeedsInput,
				t.state == lifecycle.TaskRunning && !t.cancel: // its dispatch not yet told
				r.cascading++
				e.cancelling = append(e.cancelling, cancelling{r: r})
				return
			}
		}
		return
	}
	eachHeld(r.tasks, func(t, root *task) {
		r.cascading++
		e.cascades = append(e.cascades, cascade{root: root, state: root.state, stack: []*task{t}})
	})
}

// eachHeld calls fn with each pending or ready task of ts that has a dependency that failed,
// was cancelled or was skipped, and the failed or cancelled task that dependency leads back to.
func eachHeld(ts []*task, fn func(t, root *task)) {
	cause := map[*task]*task{}
	for _, t := range ts {
		if t.state != lifecycle.TaskPending && t.state != lifecycle.TaskReady {
			continue
		}
		for _, d := range t.deps {
			if root := deadCause(d, cause); root != nil {
				fn(t, root)
				break
			}
		}
	}
}

// deadCause is the failed or cancelled task d's state leads back to, d itself when it failed
// or was cancelled, nil when d is not dead (it may still succeed) or no such task is found.
// memo holds what it found for the skipped tasks it walked.
func deadCause(d *task, memo map[*task]*task) *task {
	switch d.state {
	case lifecycle.TaskFailed, lifecycle.TaskCancelled:
		return d
	case lifecycle.TaskSkipped:
	default:
		return nil
	}
	if root, ok := memo[d]; ok {
		return root
	}
	memo[d] = nil // a cycle through skipped tasks finds nothing
	for _, up := range d.deps {
		if root := deadCause(up, memo); root != nil {
			memo[d] = root
			return root
		}
	}
	return nil
}
