package orch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// startOpts is start with engine options.
func startOpts(tb testing.TB, path string, exec orch.Executor, opts orch.Options) *harness {
	tb.Helper()
	if path == "" {
		path = filepath.Join(tb.TempDir(), "orch.db")
	}
	db := openDB(tb, path)
	eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{tb: tb, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- eng.Run(ctx) }()
	tb.Cleanup(h.stop)
	return h
}

// queuedPlan is a plan of n independent tasks on queue q ("" names none).
func queuedPlan(tb testing.TB, name, q string, concurrency, n int) *plan.Plan {
	tb.Helper()
	tasks := make([]spec, n)
	for i := range tasks {
		tasks[i] = spec{ID: fmt.Sprintf("t%d", i), Sub: "worker"}
	}
	doc := map[string]any{"version": 1, "name": name, "concurrency": concurrency, "tasks": tasks}
	if q != "" {
		doc["queue"] = q
	}
	b, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := plan.Parse(name+".json", b)
	if err != nil {
		tb.Fatalf("parse plan: %v", err)
	}
	return p
}

// A queue's concurrency bounds its tasks across all its runs; another queue's runs go on
// beside them; tasks waiting for the queue start oldest-ready first, whichever run they are of.
func TestEngine_QueueBoundsAcrossRuns(t *testing.T) {
	var mu sync.Mutex
	live := map[string]int{} // queue -> live attempts
	most := map[string]int{}
	var order []string
	queueOf := map[string]string{}
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		mu.Lock()
		q := queueOf[a.RunName]
		live[q]++
		most[q] = max(most[q], live[q])
		if q == "serial" {
			order = append(order, a.RunName+"/"+a.TaskID)
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		live[q]--
		mu.Unlock()
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := startOpts(t, "", exec, orch.Options{Queues: map[string]int{"default": 3, "serial": 1}})
	queueOf["a"], queueOf["b"], queueOf["c"] = "serial", "serial", "default"
	ids := []string{
		h.submit(queuedPlan(t, "a", "serial", 4, 4)),
		h.submit(queuedPlan(t, "b", "serial", 4, 4)),
		h.submit(queuedPlan(t, "c", "", 8, 12)),
	}
	for _, id := range ids {
		if r := h.wait(id); r.State != lifecycle.RunSucceeded {
			t.Fatalf("run %s ended %s", id, r.State)
		}
	}
	if most["serial"] != 1 {
		t.Errorf("queue serial (concurrency 1) ran %d tasks at once", most["serial"])
	}
	if most["default"] > 3 || most["default"] < 2 {
		t.Errorf("queue default (concurrency 3) ran at most %d tasks at once, want 2 or 3", most["default"])
	}
	// a's tasks became ready first (submitted first): the queue serves them before b's.
	want := []string{"a/t0", "a/t1", "a/t2", "a/t3", "b/t0", "b/t1", "b/t2", "b/t3"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("serial queue order (-want +got):\n%s", diff)
	}
	if p := exec.problems(); len(p) > 0 {
		t.Errorf("executor saw: %v", p)
	}
}

// Queues reports each queue's running tasks and depth; a restarted engine counts the attempts
// it re-attaches against their queue, and a queue agora.yaml no longer declares runs at 1.
func TestEngine_QueuesStatsAndRestart(t *testing.T) {
	release := make(chan struct{})
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		<-release
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	path := filepath.Join(t.TempDir(), "orch.db")
	h := startOpts(t, path, exec, orch.Options{Queues: map[string]int{"default": 5, "nightly": 2}})
	id := h.submit(queuedPlan(t, "n", "nightly", 4, 5))
	agoratest.WaitFor(t, 10*time.Second, "two attempts", func() bool { return len(exec.attempts()) == 2 })
	qs, err := h.eng.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Queue{
		{Name: "default", Concurrency: 5, Declared: true},
		{Name: "nightly", Concurrency: 2, Declared: true, Running: 2, Depth: 3, Runs: 1},
	}
	if diff := cmp.Diff(want, qs); diff != "" {
		t.Errorf("Queues (-want +got):\n%s", diff)
	}
	time.Sleep(20 * time.Millisecond)
	if n := len(exec.attempts()); n != 2 {
		t.Fatalf("%d attempts started on a queue of 2", n)
	}
	h.stop()

	// nightly is gone from agora.yaml: the run keeps going, one task at a time. The two
	// re-attached attempts hold the queue's slots until they end.
	exec2 := newFakeExec(func(a orch.Attempt) orch.Outcome {
		<-release
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h2 := startOpts(t, path, exec2, orch.Options{Queues: map[string]int{"default": 5}})
	agoratest.WaitFor(t, 10*time.Second, "two attempts after the restart", func() bool { return len(exec2.attempts()) == 2 })
	qs, err = h2.eng.Queues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want = []api.Queue{
		{Name: "default", Concurrency: 5, Declared: true},
		{Name: "nightly", Concurrency: 1, Running: 2, Depth: 3, Runs: 1},
	}
	if diff := cmp.Diff(want, qs); diff != "" {
		t.Errorf("Queues after restart (-want +got):\n%s", diff)
	}
	close(release)
	if r := h2.wait(id); r.State != lifecycle.RunSucceeded {
		t.Fatalf("run ended %s", r.State)
	}
	if exec2.maxLive > 2 {
		t.Errorf("%d attempts live at once", exec2.maxLive)
	}
}
