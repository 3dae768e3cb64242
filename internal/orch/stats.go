package orch

import "context"

// Stats is a snapshot of the engine's in-memory state.
type Stats struct {
	Runs         int // runs not sealed
	LiveAttempts int
	LocksHeld    int // locks with at least one holder
	LockWaiters  int
	SlotWaiters  int
	Backoffs     int
	// RunStates and TaskStates count the open runs, and their tasks, by state (sealed runs
	// have left memory). TaskStates["ready"] is the ready queue: tasks waiting for a run
	// slot, a lock, or the next batch.
	RunStates  map[string]int
	TaskStates map[string]int
}

type statsCmd struct{ reply chan Stats }

// Stats returns a snapshot, taken on the engine's goroutine between batches.
func (e *Engine) Stats(ctx context.Context) (Stats, error) {
	reply := make(chan Stats, 1)
	if err := e.send(ctx, statsCmd{reply: reply}); err != nil {
		return Stats{}, err
	}
	return await(ctx, e, reply)
}

func (e *Engine) stats() Stats {
	s := Stats{Runs: len(e.runs), LiveAttempts: len(e.live), Backoffs: len(e.timers)}
	for _, l := range e.locks {
		if l.exclusive != nil || l.shared > 0 {
			s.LocksHeld++
		}
		s.LockWaiters += l.waiters.len()
	}
	s.RunStates, s.TaskStates = map[string]int{}, map[string]int{}
	for _, r := range e.runs {
		s.SlotWaiters += r.waiting.len()
		s.RunStates[r.state]++
		for st, n := range r.counts {
			if n != 0 {
				s.TaskStates[st] += n
			}
		}
	}
	return s
}
