package orch

import (
	"container/heap"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// becomeReady makes a pending task whose dependencies all succeeded ready, and a candidate
// for this batch's scheduling pass.
func (e *Engine) becomeReady(t *task) {
	if t.spec.FanOut != nil {
		e.groupDone(t) // a fan-out fires nothing: its items are done
		return
	}
	e.seq++
	t.readySeq = e.seq
	t.setRetryAt(time.Time{})
	e.set(t, lifecycle.TaskReady)
	// The ready entry is written at commit only if t is still ready then: a task that becomes
	// ready and fires in the same batch goes from pending to running in the database, and its
	// fired entry says it was ready (readiness that never reached the disk needs no entry).
	t.readyUnrecorded = true
	e.readied = append(e.readied, t)
	e.candidates = append(e.candidates, t)
}

// recordReady writes the ready entries of tasks that are still waiting at commit time.
func (e *Engine) recordReady() {
	for _, t := range e.readied {
		if t.readyUnrecorded && t.state == lifecycle.TaskReady {
			details := e.newDetails()
			details["ready_seq"] = t.readySeq
			e.record(t.run, t, entry.TaskReady, details)
		}
		t.readyUnrecorded = false
	}
	e.readied = e.readied[:0]
}

// schedule fires every ready task that may start now: first the waiters woken by released
// locks and freed run slots (they were ready earlier), then the tasks that became ready in
// this batch. It touches only those tasks.
func (e *Engine) schedule() {
	for len(e.wokenLocks) > 0 || len(e.wokenRuns) > 0 || len(e.wokenQueues) > 0 || len(e.candidates) > 0 {
		for l := range e.wokenLocks {
			delete(e.wokenLocks, l)
			e.wakeLock(l)
		}
		for r := range e.wokenRuns {
			delete(e.wokenRuns, r)
			e.wakeRun(r)
		}
		e.wakeQueues()
		cands := e.candidates
		e.candidates = nil
		for _, t := range cands {
			e.tryStart(t)
		}
	}
}

// wakeLock offers a lock to its waiters, oldest first, while its holders admit the next.
func (e *Engine) wakeLock(l *lockState) {
	for l.waiters.len() > 0 {
		w := l.waiters.min()
		if !l.compatible(w.wantsShared(l)) {
			return
		}
		l.waiters.pop()
		e.tryStart(w)
		if w.inQueue == &l.waiters {
			return
		}
	}
}

// wakeRun offers a run's free slots to its waiting tasks, oldest first. A task that then
// waits for a lock leaves the run's queue, so it never blocks the tasks behind it.
func (e *Engine) wakeRun(r *run) {
	for r.running < r.concurrency && r.waiting.len() > 0 {
		w := r.waiting.pop()
		e.tryStart(w)
		if w.inQueue == &r.waiting {
			return
		}
	}
}

func (t *task) wantsShared(l *lockState) bool {
	for _, lr := range t.locks {
		if lr.l == l {
			return lr.shared
		}
	}
	return false
}

// tryStart fires t when its run has a slot and every lock admits it; otherwise t waits in
// the queue of the first thing that stopped it: its run, its run's queue (queues.go) or a lock.
func (e *Engine) tryStart(t *task) {
	r := t.run
	if t.state != lifecycle.TaskReady || r.cancelRequested {
		unqueue(t)
		return
	}
	if spent := r.budgetSpent(); spent != "" {
		e.failOverBudget(t, spent)
		return
	}
	if n := t.inputCount(); n > MaxAttemptInputs {
		e.failUnfired(t, lifecycle.ReasonDenied, fmt.Sprintf("its needs hand it %d products; at most %d (a fan-out this large needs its items' products gathered in steps)", n, MaxAttemptInputs))
		return
	}
	if r.running >= r.concurrency {
		r.waiting.push(t)
		return
	}
	if w := r.waiting.min(); w != nil && w != t && w.readySeq < t.readySeq {
		r.waiting.push(t)
		return
	}
	if !e.queueAdmits(t) {
		return
	}
	for _, lr := range t.locks {
		if !lr.l.admits(t, lr.shared) {
			lr.l.waiters.push(t)
			e.observeLockWait(t, lr.l)
			return
		}
	}
	unqueue(t)
	for _, lr := range t.locks {
		lr.l.acquire(t, lr.shared)
	}
	r.running++
	r.q.running++
	e.fire(t)
}

// fire starts t's next attempt: durable in this batch, started after the commit.
func (e *Engine) fire(t *task) {
	r := t.run
	t.attempts++
	t.dispatchID = e.newID()
	t.setReason("", "")
	t.setQuestion("")
	e.set(t, lifecycle.TaskRunning)
	e.live[t.dispatchID] = t
	a := e.attempt(t)
	e.b.fires = append(e.b.fires, a)
	e.b.attempts = append(e.b.attempts, attemptRow{taskIx: t.idx, at: e.opts.Now()})
	details := e.newDetails()
	details[entry.KeyAttempt], details[entry.KeyDispatchID] = int64(t.attempts), t.dispatchID
	details[entry.KeySubagent], details["ready_seq"] = r.subagent(t.spec.Subagent), t.readySeq
	if t.parentID != "" {
		details["answers"] = t.parentID
	}
	if a.Learn {
		details["learn"] = true // only when set: other tasks' entries keep their bytes
	}
	if len(a.Inputs) > 0 {
		ins := make([]any, len(a.Inputs))
		for i, in := range a.Inputs {
			m := map[string]any{"key": in.Key, "from_task": in.FromTask, "from_dispatch": in.FromDispatch, "select": in.Select}
			if in.Dir != "" {
				m["dir"] = in.Dir
			}
			if in.Apply {
				m["apply"] = true
			}
			if in.Stack {
				m["stack"] = true
			}
			ins[i] = m
		}
		details["inputs"] = ins
	}
	e.record(r, t, entry.TaskFired, details)
}

// attempt describes t's current attempt for the executor.
func (e *Engine) attempt(t *task) Attempt {
	r := t.run
	a := Attempt{
		DispatchID: t.dispatchID, RunID: r.id, RunName: r.name, TaskID: t.spec.ID, Number: t.attempts,
		Subagent: r.subagent(t.spec.Subagent), Env: t.spec.Env, Target: t.spec.Target, Input: t.spec.Input, Timeout: t.spec.Timeout,
		Repo: r.repo, Revision: r.revision, Workspace: r.workspace, ParentID: t.parentID, Answer: t.answer, Grants: t.spec.Grants,
		Actor:  r.actor + " via orch/" + r.id + "/" + t.spec.ID,
		Budget: t.spec.Budget,
		Verify: t.spec.Verify,
		Learn:  t.spec.Learn,
	}
	if !r.budget.IsZero() {
		a.Ceilings = []budget.Ceiling{{Source: "run " + r.name + "'s remaining budget", Budget: r.remaining()}}
	}
	a.Inputs = stackInputs(t)
	for _, key := range slices.Sorted(maps.Keys(t.spec.Needs)) {
		n := t.spec.Needs[key]
		up := r.task(n.From)
		if up.spec.FanOut != nil {
			a.Inputs = append(a.Inputs, groupInputs(key, n, up)...)
			continue
		}
		// A fix starts from the work it fixes: that patch is applied before its agent runs.
		apply := t.role == causeFix && key == fixPatchKey
		a.Inputs = append(a.Inputs, Input{Key: key, FromTask: n.From, FromDispatch: up.productID(), Select: n.Select, Apply: apply})
	}
	a.Lists, a.Review = t.lists(), t.role == causeReview
	return a
}

// dueTimers makes every task whose backoff ended ready.
func (e *Engine) dueTimers() {
	now := e.opts.Now()
	for len(e.timers) > 0 && !e.timers[0].retryAt.After(now) {
		t := heap.Pop(&e.timers).(*task)
		t.run.backoff--
		if t.state == lifecycle.TaskPending && t.unmet == 0 {
			e.becomeReady(t)
		}
	}
}

// startTimer makes t wait until t.retryAt.
func (e *Engine) startTimer(t *task) {
	t.run.backoff++
	heap.Push(&e.timers, t)
}

// stopTimer removes t's pending backoff, if any.
func (e *Engine) stopTimer(t *task) {
	if t.timerIdx >= 0 && int(t.timerIdx) < len(e.timers) && e.timers[t.timerIdx] == t {
		heap.Remove(&e.timers, int(t.timerIdx))
		t.run.backoff--
	}
	t.setRetryAt(time.Time{})
}

// releaseSlot gives back t's locks and run slot, waking whoever waits for them.
func (e *Engine) releaseSlot(t *task) {
	for _, lr := range t.locks {
		lr.l.release(t, lr.shared)
		e.wokenLocks[lr.l] = true
	}
	t.run.running--
	e.wokenRuns[t.run] = true
	t.run.q.running--
	e.wokenQueues[t.run.q] = true
}
