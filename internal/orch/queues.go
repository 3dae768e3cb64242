package orch

import (
	"context"
	"maps"
	"slices"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// queueState is one queue: how many tasks of its runs may run at once, all runs together.
// A task takes a slot of its run's queue when it fires, beside its run's slot and its locks,
// and gives it back when its attempt ends.
type queueState struct {
	name     string
	limit    int  // 0: no limit (an engine without Options.Queues)
	declared bool // agora.yaml declares it; a run loaded on a queue removed since runs at 1
	running  int
	waiting  queue // ready tasks waiting for a slot of this queue, oldest ready first
}

// undeclaredQueueLimit is the concurrency of a queue a loaded run names that agora.yaml no
// longer declares: the run still finishes, one task at a time, rather than sit forever.
const undeclaredQueueLimit = 1

// queueOf returns the named queue's state, creating it.
func (e *Engine) queueOf(name string) *queueState {
	if q, ok := e.queues[name]; ok {
		return q
	}
	q := &queueState{name: name}
	if e.opts.Queues != nil {
		limit, ok := e.opts.Queues[name]
		q.declared = ok
		q.limit = limit
		if !ok {
			q.limit = undeclaredQueueLimit
		}
	}
	e.queues[name] = q
	return q
}

// queueAdmits reports whether t may take a slot of its run's queue now: the queue has one
// free and no task that became ready before t waits for it. Otherwise t waits in the queue.
func (e *Engine) queueAdmits(t *task) bool {
	q := t.run.q
	if q.limit == 0 {
		return true
	}
	if q.running >= q.limit {
		q.waiting.push(t)
		return false
	}
	if w := q.waiting.min(); w != nil && w != t && w.readySeq < t.readySeq {
		q.waiting.push(t)
		return false
	}
	return true
}

// wakeQueue offers a queue's free slots to its waiting tasks, oldest first. A task that then
// waits for its run or a lock leaves the queue's waiters, so it never blocks those behind it.
func (e *Engine) wakeQueue(q *queueState) {
	for (q.limit == 0 || q.running < q.limit) && q.waiting.len() > 0 {
		w := q.waiting.pop()
		e.tryStart(w)
		if w.inQueue == &q.waiting {
			return
		}
	}
}

// wakeQueues wakes every queue a released slot woke.
func (e *Engine) wakeQueues() {
	for q := range e.wokenQueues {
		delete(e.wokenQueues, q)
		e.wakeQueue(q)
	}
}

type queuesCmd struct{ reply chan []api.Queue }

// Queues returns every queue: the declared ones and any an open run names, each with its
// running tasks and its depth (the ready tasks of its open runs: waiting for a slot of the
// queue, of their run, a lock, or the next batch). Taken on the engine's goroutine between
// batches, in O(open runs).
func (e *Engine) Queues(ctx context.Context) ([]api.Queue, error) {
	reply := make(chan []api.Queue, 1)
	if err := e.send(ctx, queuesCmd{reply: reply}); err != nil {
		return nil, err
	}
	return await(ctx, e, reply)
}

func (e *Engine) queueStats() []api.Queue {
	for name := range e.opts.Queues {
		e.queueOf(name)
	}
	out := map[string]*api.Queue{}
	for name, q := range e.queues {
		out[name] = &api.Queue{Name: name, Concurrency: q.limit, Declared: q.declared || e.opts.Queues == nil, Running: q.running}
	}
	for _, r := range e.runs {
		if r.sealed {
			continue
		}
		s := out[r.q.name]
		s.Runs++
		s.Depth += r.counts[lifecycle.TaskReady]
	}
	qs := make([]api.Queue, 0, len(out))
	for _, name := range slices.Sorted(maps.Keys(out)) {
		qs = append(qs, *out[name])
	}
	return qs
}
