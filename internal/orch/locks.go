package orch

// lockState is one named lock, global across runs: at most one exclusive holder, or any
// number of shared holders, and the tasks waiting for it in the order they became ready.
type lockState struct {
	name      string
	exclusive *task
	shared    int
	waiters   queue
}

// compatible reports whether the lock's current holders admit one more in the given mode.
func (l *lockState) compatible(shared bool) bool {
	if l.exclusive != nil {
		return false
	}
	return shared || l.shared == 0
}

// admits reports whether t may take the lock now: its holders admit it and no waiter that
// became ready before t is still waiting for it (first ready goes first).
func (l *lockState) admits(t *task, shared bool) bool {
	if !l.compatible(shared) {
		return false
	}
	w := l.waiters.min()
	return w == nil || w == t || w.readySeq > t.readySeq
}

func (l *lockState) acquire(t *task, shared bool) {
	if shared {
		l.shared++
	} else {
		l.exclusive = t
	}
}

func (l *lockState) release(t *task, shared bool) {
	if shared {
		if l.shared > 0 {
			l.shared--
		}
	} else if l.exclusive == t {
		l.exclusive = nil
	}
}
