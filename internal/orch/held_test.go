package orch_test

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// heldLog records what Options.Held is told.
type heldLog struct {
	mu   sync.Mutex
	told []int
}

func (l *heldLog) held(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, n)
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
			return orch.Outcome{State: api.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": list}}
		}
		return orch.Outcome{State: api.TaskSucceeded}
	})
	log := &heldLog{}
	h := startWith(t, "", exec, orch.Options{Held: log.held})
	id := h.runToEnd(parsePlan(t, fanOutPlan))
	if r := h.wait(id); r.State != api.RunSucceeded || r.Total != 6 {
		t.Fatalf("run %s with %d tasks: %v", r.State, r.Total, taskStates(r))
	}
	h.stop()
	// The plan's three tasks, the three items added, then none: the run was sealed.
	if got, want := log.get(), []int{3, 6, 0}; !slices.Equal(got, want) {
		t.Errorf("Held was told %v, want %v", got, want)
	}

	// A run open at a restart is held again, and told before anything else happens.
	hold := make(chan struct{})
	defer close(hold)
	blocked := newFakeExec(func(a orch.Attempt) orch.Outcome {
		<-hold
		return orch.Outcome{State: api.TaskFailed}
	})
	path := filepath.Join(t.TempDir(), "orch.db")
	h = startWith(t, path, blocked, orch.Options{})
	h.submit(parsePlan(t, fanOutPlan))
	h.stop()
	again := &heldLog{}
	h = startWith(t, path, newFakeExec(func(orch.Attempt) orch.Outcome { <-hold; return orch.Outcome{State: api.TaskFailed} }), orch.Options{Held: again.held})
	h.eng.Stats(t.Context()) // a round trip: Run has started and told what it loaded
	if got := again.get(); len(got) == 0 || got[0] != 3 {
		t.Errorf("after a restart Held was told %v first, want the loaded run's 3 tasks", got)
	}
}

// TestMemoryLimitFor: serve's limit is MemoryLimit with no task, and grows by TaskMemory a
// task: at the largest run validate allows it stays under what a 2-core machine can give.
func TestMemoryLimitFor(t *testing.T) {
	if got := orch.MemoryLimitFor(0); got != orch.MemoryLimit {
		t.Errorf("MemoryLimitFor(0) = %d, want MemoryLimit %d", got, orch.MemoryLimit)
	}
	if got, want := orch.MemoryLimitFor(1000)-orch.MemoryLimitFor(0), int64(1000*orch.TaskMemory); got != want {
		t.Errorf("1000 tasks add %d bytes to the limit, want %d", got, want)
	}
	if got := orch.MemoryLimitFor(orch.MaxRunTasks); got > 1<<30 {
		t.Errorf("the largest run's limit is %d MiB, over 1 GiB", got>>20)
	}
}
