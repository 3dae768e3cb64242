package orch_test

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// heldLog records what Options.Held is told.
type heldLog struct {
	mu   sync.Mutex
	told []int
	cond *sync.Cond
}

func (l *heldLog) held(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, n)
	if l.cond != nil {
		l.cond.Broadcast()
	}
}

// waitLen waits until Held has been told n times, or 30 s (a generous bound on a wait for
// an event, not a measure of it): the engine tells Held on its own goroutine, after replying
// to the command that caused it.
func (l *heldLog) waitLen(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cond == nil {
		l.cond = sync.NewCond(&l.mu)
	}
	expired := false
	stop := time.AfterFunc(30*time.Second, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		expired = true
		l.cond.Broadcast()
	})
	defer stop.Stop()
	for len(l.told) < n && !expired {
		l.cond.Wait()
	}
}

func (l *heldLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.told)
}

// TestEngine_HeldFollowsTheWork: Options.Held hears the tasks of open runs as they change: a
// submitted plan's tasks before their commit, the tasks a fan-out adds, none once the run is
// sealed; and, after a restart, the tasks of the runs loaded. Serve's memory limit follows
// these counts (orch.MemoryLimitFor), so a count that lags or never falls would leave serve
// collecting without end or holding memory it no longer needs.
func TestEngine_HeldFollowsTheWork(t *testing.T) {
	list := items(t, `[{"id": "a"}, {"id": "b"}, {"id": "c"}]`)
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "split" {
			return orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": list}}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	log := &heldLog{}
	h := startWith(t, "", exec, orch.Options{Held: log.held})
	id := h.runToEnd(parsePlan(t, fanOutPlan))
	if r := h.wait(id); r.State != lifecycle.RunSucceeded || r.Total != 6 {
		t.Fatalf("run %s with %d tasks: %v", r.State, r.Total, taskStates(r))
	}
	h.stop()
	// The plan's three tasks, the three items added, then none: the run was sealed.
	if got, want := log.get(), []int{3, 6, 0}; !slices.Equal(got, want) {
		t.Errorf("Held was told %v, want %v", got, want)
	}

	// A submission is told before its run is built (the limit grows before the run's
	// allocations, not after them), and a submission that makes no run (the same plan again:
	// the open run answers) is told back at once.
	hold := make(chan struct{})
	defer close(hold)
	ahead := &heldLog{}
	h = startWith(t, "", newFakeExec(func(orch.Attempt) orch.Outcome { <-hold; return orch.Outcome{State: lifecycle.TaskFailed} }), orch.Options{Held: ahead.held})
	first := h.submit(parsePlan(t, fanOutPlan))
	if again := h.submit(parsePlan(t, fanOutPlan)); again != first {
		t.Fatalf("the same plan again made run %s, want the open run %s", again, first)
	}
	ahead.waitLen(3)
	if got, want := ahead.get(), []int{3, 6, 3}; !slices.Equal(got, want) {
		t.Errorf("Held was told %v, want %v: the first run's 3, 3 more ahead of the second submission, then the 3 held", got, want)
	}
	h.stop()

	// A run open at a restart is held again, and told before anything else happens.
	blocked := newFakeExec(func(a orch.Attempt) orch.Outcome {
		<-hold
		return orch.Outcome{State: lifecycle.TaskFailed}
	})
	path := filepath.Join(t.TempDir(), "orch.db")
	h = startWith(t, path, blocked, orch.Options{})
	h.submit(parsePlan(t, fanOutPlan))
	h.stop()
	again := &heldLog{}
	h = startWith(t, path, newFakeExec(func(orch.Attempt) orch.Outcome { <-hold; return orch.Outcome{State: lifecycle.TaskFailed} }), orch.Options{Held: again.held})
	h.eng.Stats(t.Context()) // a round trip: Run has started and told what it loaded
	if got := again.get(); len(got) == 0 || got[0] != 3 {
		t.Errorf("after a restart Held was told %v first, want the loaded run's 3 tasks", got)
	}
}

// TestMemoryLimitFor: serve's limit is MemoryLimit with no task, and grows by TaskMemory a
// task; past that it is twice what the tasks keep (TaskLive a task), so the collector keeps
// room however many tasks are open; at the largest run validate allows it stays under what a
// 2-core machine can give.
func TestMemoryLimitFor(t *testing.T) {
	if got := orch.MemoryLimitFor(0); got != orch.MemoryLimit {
		t.Errorf("MemoryLimitFor(0) = %d, want MemoryLimit %d", got, orch.MemoryLimit)
	}
	if got, want := orch.MemoryLimitFor(1000)-orch.MemoryLimitFor(0), int64(1000*orch.TaskMemory); got != want {
		t.Errorf("1000 tasks add %d bytes to the limit, want %d", got, want)
	}
	for _, n := range []int{100_000, orch.MaxRunTasks, 3 * orch.MaxRunTasks} {
		if got, least := orch.MemoryLimitFor(n), int64(2*n*orch.TaskLive); got < least {
			t.Errorf("the limit at %d tasks is %d MiB, under twice what they keep (%d MiB)", n, got>>20, least>>20)
		}
	}
	if got := orch.MemoryLimitFor(orch.MaxRunTasks); got > 1<<30 {
		t.Errorf("the largest run's limit is %d MiB, over 1 GiB", got>>20)
	}
}
