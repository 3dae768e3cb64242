package orch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/store"
)

// spec is a test plan's task.
type spec struct {
	ID      string         `json:"id"`
	Deps    []string       `json:"depends_on,omitempty"`
	Locks   []any          `json:"locks,omitempty"`
	Needs   map[string]any `json:"needs,omitempty"`
	Retry   map[string]any `json:"retry,omitempty"`
	Input   map[string]any `json:"input,omitempty"`
	Sub     string         `json:"subagent"`
	Timeout string         `json:"timeout,omitempty"`
	Extra   map[string]any `json:"-"`
}

func mkPlan(tb testing.TB, name string, concurrency int, tasks ...spec) *plan.Plan {
	tb.Helper()
	for i := range tasks {
		if tasks[i].Sub == "" {
			tasks[i].Sub = "worker"
		}
	}
	doc := map[string]any{"version": 1, "name": name, "concurrency": concurrency, "tasks": tasks}
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

// fakeExec is an in-process executor. decide picks each attempt's outcome; it runs on its
// own goroutine, so it may block (to hold an attempt open) until the test releases it.
type fakeExec struct {
	mu       sync.Mutex
	decide   func(a orch.Attempt) orch.Outcome
	started  []orch.Attempt
	byID     map[string]orch.Attempt
	live     map[string]bool
	cancels  map[string]chan struct{}
	maxLive  int
	errs     []string
	check    func(a orch.Attempt, live map[string]orch.Attempt) string
	liveAtts map[string]orch.Attempt
}

func newFakeExec(decide func(a orch.Attempt) orch.Outcome) *fakeExec {
	return &fakeExec{decide: decide, byID: map[string]orch.Attempt{}, live: map[string]bool{},
		cancels: map[string]chan struct{}{}, liveAtts: map[string]orch.Attempt{}}
}

func (f *fakeExec) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	f.mu.Lock()
	if f.live[a.TaskID+"@"+a.RunID] {
		f.errs = append(f.errs, fmt.Sprintf("task %s started while an attempt of it is live", a.TaskID))
	}
	if f.check != nil {
		if msg := f.check(a, f.liveAtts); msg != "" {
			f.errs = append(f.errs, msg)
		}
	}
	f.live[a.TaskID+"@"+a.RunID] = true
	f.liveAtts[a.DispatchID] = a
	f.maxLive = max(f.maxLive, len(f.liveAtts))
	f.started = append(f.started, a)
	f.byID[a.DispatchID] = a
	cancel := make(chan struct{})
	f.cancels[a.DispatchID] = cancel
	f.mu.Unlock()
	go func() {
		o := f.decideOrCancel(a, cancel)
		o.DispatchID = a.DispatchID
		f.mu.Lock()
		delete(f.live, a.TaskID+"@"+a.RunID)
		delete(f.liveAtts, a.DispatchID)
		f.mu.Unlock()
		done(o)
	}()
}

func (f *fakeExec) decideOrCancel(a orch.Attempt, cancel chan struct{}) orch.Outcome {
	res := make(chan orch.Outcome, 1)
	go func() { res <- f.decide(a) }()
	select {
	case o := <-res:
		return o
	case <-cancel:
		return orch.Outcome{State: lifecycle.TaskCancelled, Reason: "cancelled"}
	}
}

func (f *fakeExec) Cancel(ctx context.Context, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.cancels[id]; ok {
		delete(f.cancels, id)
		close(c)
	}
}

func (f *fakeExec) attempts() []orch.Attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]orch.Attempt(nil), f.started...)
}

func (f *fakeExec) problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errs...)
}

func succeed(orch.Attempt) orch.Outcome { return orch.Outcome{State: lifecycle.TaskSucceeded} }

// harness runs an engine on a real SQLite file.
type harness struct {
	tb     testing.TB
	path   string
	db     *store.DB
	eng    *orch.Engine
	cancel context.CancelFunc
	done   chan error
}

func openDB(tb testing.TB, path string) *store.DB {
	tb.Helper()
	db, err := store.Open(context.Background(), path, orch.Migrations(), store.FullSync())
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

func start(tb testing.TB, path string, exec orch.Executor) *harness {
	tb.Helper()
	if path == "" {
		path = filepath.Join(tb.TempDir(), "orch.db")
	}
	db := openDB(tb, path)
	eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, orch.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{tb: tb, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- eng.Run(ctx) }()
	tb.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	if err := <-h.done; err != nil {
		h.tb.Errorf("engine: %v", err)
	}
	h.cancel = nil
	h.db.Close()
}

// runToEnd submits p and waits for its orch.run.ended event, without polling the database.
func (h *harness) runToEnd(p *plan.Plan) string {
	h.tb.Helper()
	ch, stop := h.eng.Subscribe("*")
	defer stop()
	id := h.submit(p)
	for ev := range ch {
		if ev.Kind == "orch.run.ended" && ev.Run == id {
			return id
		}
	}
	h.tb.Log("watcher lagged; polling")
	h.wait(id)
	return id
}

func (h *harness) submit(p *plan.Plan) string {
	h.tb.Helper()
	id, _, err := h.eng.Submit(context.Background(), p, orch.Checkout{}, "tester")
	if err != nil {
		h.tb.Fatalf("submit: %v", err)
	}
	return id
}

// waitStall is how long a run may stand still (its state and counts unchanged) before
// [harness.wait] says it never gets there: a run that moves is waited for however slow a
// loaded machine makes it.
const waitStall = 30 * time.Second

// wait waits until the run is in a terminal or needs_input state (or one of states).
func (h *harness) wait(id string, states ...string) api.Run {
	h.tb.Helper()
	if len(states) == 0 {
		states = []string{lifecycle.RunSucceeded, lifecycle.RunFailed, lifecycle.RunCancelled}
	}
	return h.waitMoving(id, waitStall, func(r api.Run) bool { return slices.Contains(states, r.State) })
}

// waitMoving reads run id until done holds of it. No event says a run moved, so it polls
// (agoratest.Poll, backing off: a status of thousands of tasks is CPU the engine needs), and
// fails only when the run's state and counts stay the same for stall: a run that moves is
// waited for however slow a loaded machine makes it.
func (h *harness) waitMoving(id string, stall time.Duration, done func(api.Run) bool) api.Run {
	h.tb.Helper()
	var r api.Run
	last := ""
	for {
		moved := false
		ok := agoratest.Poll(stall, func() bool {
			var err error
			if r, err = h.eng.Status(context.Background(), id); err != nil {
				h.tb.Fatal(err)
			}
			if now := fmt.Sprint(r.State, r.Counts); now != last {
				last, moved = now, true
			}
			return done(r) || moved
		})
		if !ok {
			h.tb.Fatalf("run %s still %s with %v, unchanged for %s", id, r.State, r.Counts, stall)
		}
		if done(r) {
			return r
		}
	}
}

// waitTask waits until task of run id is in state.
func (h *harness) waitTask(id, task, state string) {
	h.tb.Helper()
	agoratest.WaitFor(h.tb, 10*time.Second, "task "+task+" to be "+state, func() bool {
		r, err := h.eng.Status(context.Background(), id)
		if err != nil {
			h.tb.Fatal(err)
		}
		return taskStates(r)[task] == state
	})
}

// waitFolded waits for the engine to have folded every row log record into the tasks and
// attempts tables (fold.go): a run's end is published before its rows are folded, so a test
// that reads or edits those rows waits for this first.
func (h *harness) waitFolded() {
	h.tb.Helper()
	agoratest.WaitFor(h.tb, time.Minute, "the engine to fold its row log records", func() bool {
		var waiting bool
		if err := h.db.SQL().QueryRow(`SELECT EXISTS (SELECT 1 FROM row_log)`).Scan(&waiting); err != nil {
			h.tb.Fatal(err)
		}
		return !waiting
	})
}

func taskStates(r api.Run) map[string]string {
	m := map[string]string{}
	for _, t := range r.Tasks {
		m[t.ID] = t.State
	}
	return m
}
