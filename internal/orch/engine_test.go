package orch_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
)

func TestEngine_DiamondRunsInDependencyOrder(t *testing.T) {
	f := newFakeExec(succeed)
	h := start(t, "", f)
	id := h.submit(mkPlan(t, "diamond", 4,
		spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}}, spec{ID: "c", Deps: []string{"a"}},
		spec{ID: "d", Deps: []string{"b", "c"}, Needs: map[string]any{"fix": map[string]any{"from": "b", "select": "patch"}}}))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded || !r.Sealed {
		t.Fatalf("run %s sealed=%v, want succeeded and sealed", r.State, r.Sealed)
	}
	order := map[string]int{}
	var byTask = map[string]orch.Attempt{}
	for i, a := range f.attempts() {
		order[a.TaskID] = i
		byTask[a.TaskID] = a
	}
	if !(order["a"] < order["b"] && order["a"] < order["c"] && order["b"] < order["d"] && order["c"] < order["d"]) {
		t.Errorf("fire order %v breaks the dependencies", order)
	}
	want := []orch.Input{{Key: "fix", FromTask: "b", FromDispatch: byTask["b"].DispatchID, Select: "patch"}}
	if diff := cmp.Diff(want, byTask["d"].Inputs); diff != "" {
		t.Errorf("d's inputs (-want +got):\n%s", diff)
	}
}

func TestEngine_TerminalFailureSkipsEveryDependent(t *testing.T) {
	f := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "b" {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "denied", Detail: "not granted"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", f)
	id := h.submit(mkPlan(t, "cascade", 4,
		spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}, Retry: map[string]any{"max_attempts": 5}},
		spec{ID: "c", Deps: []string{"b"}}, spec{ID: "d", Deps: []string{"c"}}, spec{ID: "e", Deps: []string{"a"}}))
	r := h.wait(id)
	want := map[string]string{"a": "succeeded", "b": "failed", "c": "skipped", "d": "skipped", "e": "succeeded"}
	if diff := cmp.Diff(want, taskStates(r)); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if r.State != lifecycle.RunFailed || r.Sealed {
		t.Errorf("run %s sealed=%v, want failed and open (retry may still run it)", r.State, r.Sealed)
	}
	if n := countAttempts(f, "b"); n != 1 {
		t.Errorf("denied task fired %d times; denied never retries", n)
	}
}

func countAttempts(f *fakeExec, task string) int {
	n := 0
	for _, a := range f.attempts() {
		if a.TaskID == task {
			n++
		}
	}
	return n
}

// TestEngine_RetriesRetryableReasonsWithBackoff retries a retryable failure (and a worker
// failure, unless the task says not to) up to max_attempts, each retry fired when its backoff
// has passed and not before: on the bubble's clock, with the jitter fixed at a half, a 10 s
// initial backoff doubling to a 15 s ceiling puts the attempts at 0, 5 s and 12.5 s.
func TestEngine_RetriesRetryableReasonsWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		tries := map[string]int{}
		fired := map[string][]time.Duration{}
		t0 := time.Now()
		f := newFakeExec(func(a orch.Attempt) orch.Outcome {
			mu.Lock()
			defer mu.Unlock()
			tries[a.TaskID]++
			fired[a.TaskID] = append(fired[a.TaskID], time.Since(t0))
			switch {
			case a.TaskID == "flaky" && tries["flaky"] < 3:
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "provider-failed"}
			case a.TaskID == "broken":
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "worker-failed"}
			case a.TaskID == "strict":
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "worker-failed"}
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded}
		})
		h := startOpts(t, "", f, orch.Options{Rand: func() float64 { return 0.5 }})
		retry := map[string]any{"max_attempts": 3, "initial_backoff": "10s", "max_backoff": "15s"}
		id := h.runToEnd(mkPlan(t, "retries", 4,
			spec{ID: "flaky", Retry: retry},
			spec{ID: "broken", Retry: retry},
			spec{ID: "strict", Retry: map[string]any{"max_attempts": 3, "initial_backoff": "10s", "on_worker_failed": false}}))
		r := h.wait(id)
		want := map[string]string{"flaky": "succeeded", "broken": "failed", "strict": "failed"}
		if diff := cmp.Diff(want, taskStates(r)); diff != "" {
			t.Errorf("states (-want +got):\n%s", diff)
		}
		for task, n := range map[string]int{"flaky": 3, "broken": 3, "strict": 1} {
			if got := countAttempts(f, task); got != n {
				t.Errorf("%s fired %d times, want %d", task, got, n)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		backedOff := []time.Duration{0, 5 * time.Second, 12500 * time.Millisecond}
		for task, want := range map[string][]time.Duration{"flaky": backedOff, "broken": backedOff, "strict": {0}} {
			if !slices.Equal(fired[task], want) {
				t.Errorf("%s fired at %v, want %v (each retry its backoff after the failure)", task, fired[task], want)
			}
		}
		seen := map[string]bool{}
		for _, a := range f.attempts() {
			if seen[a.DispatchID] {
				t.Errorf("dispatch id %s reused", a.DispatchID)
			}
			seen[a.DispatchID] = true
		}
	})
}

func TestEngine_ExclusiveLocksSerialiseSharedLocksCoexist(t *testing.T) {
	var mu sync.Mutex
	running := map[string]bool{}
	var overlaps [][]string
	f := newFakeExec(func(a orch.Attempt) orch.Outcome {
		mu.Lock()
		var now []string
		for k := range running {
			now = append(now, k)
		}
		running[a.TaskID] = true
		overlaps = append(overlaps, append(now, a.TaskID))
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		delete(running, a.TaskID)
		mu.Unlock()
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", f)
	id := h.submit(mkPlan(t, "locks", 8,
		spec{ID: "x1", Locks: []any{"repo"}}, spec{ID: "x2", Locks: []any{"repo"}},
		spec{ID: "r1", Locks: []any{map[string]any{"name": "db", "mode": "shared"}}},
		spec{ID: "r2", Locks: []any{map[string]any{"name": "db", "mode": "shared"}}}))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
	sharedTogether := false
	for _, o := range overlaps {
		if slices.Contains(o, "x1") && slices.Contains(o, "x2") {
			t.Errorf("x1 and x2 (exclusive lock repo) ran together: %v", o)
		}
		if slices.Contains(o, "r1") && slices.Contains(o, "r2") {
			sharedTogether = true
		}
	}
	if !sharedTogether {
		t.Errorf("r1 and r2 (shared lock db) never ran together: %v", overlaps)
	}
}

func TestEngine_LockWaiterDoesNotBlockTaskWithFreeLocks(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var order []string
	f := newFakeExec(func(a orch.Attempt) orch.Outcome {
		mu.Lock()
		order = append(order, a.TaskID)
		mu.Unlock()
		if a.TaskID == "holder" {
			<-release
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", f)
	// holder takes L; blocked (ready before free) waits for l; free needs nothing held.
	id := h.submit(mkPlan(t, "hol", 2,
		spec{ID: "holder", Locks: []any{"l"}}, spec{ID: "blocked", Locks: []any{"l"}},
		spec{ID: "free", Locks: []any{"m"}}))
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := slices.Contains(order, "free")
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("free never ran while blocked waited for L: order %v", order)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(release)
	if r := h.wait(id); r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
}

func TestEngine_NeedsInputThenAnswerResumes(t *testing.T) {
	f := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "ask" && a.Answer == "" {
			return orch.Outcome{State: lifecycle.TaskNeedsInput, Question: "which branch?"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", f)
	id := h.submit(mkPlan(t, "ask", 2, spec{ID: "ask"}, spec{ID: "after", Deps: []string{"ask"}}))
	r := h.wait(id, lifecycle.RunNeedsInput)
	if q := r.Tasks[0].Question; q != "which branch?" {
		t.Errorf("question %q", q)
	}
	first := r.Tasks[0].DispatchID
	if err := h.eng.Answer(t.Context(), api.ActionRequest{Run: id, Task: "after", Answer: "x"}); !errors.Is(err, orch.ErrConflict) {
		t.Errorf("answering a pending task: %v, want conflict", err)
	}
	if err := h.eng.Answer(t.Context(), api.ActionRequest{Run: id, Task: "ask", Answer: "main", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	r = h.wait(id)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s", r.State)
	}
	atts := f.attempts()
	if a := atts[1]; a.TaskID != "ask" || a.Answer != "main" || a.ParentID != first {
		t.Errorf("resume attempt %+v, want answer main and parent %s", a, first)
	}
}

func TestEngine_CancelRunStopsEverythingAndNeverFiresAgain(t *testing.T) {
	block := make(chan struct{})
	f := newFakeExec(func(a orch.Attempt) orch.Outcome {
		<-block
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", f)
	id := h.submit(mkPlan(t, "cancel", 1, spec{ID: "a"}, spec{ID: "b"}, spec{ID: "c", Deps: []string{"a"}}))
	agoratest.WaitFor(t, 10*time.Second, "the first attempt", func() bool { return len(f.attempts()) == 1 })
	if err := h.eng.Cancel(t.Context(), api.ActionRequest{Run: id, Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	r := h.wait(id)
	if r.State != lifecycle.RunCancelled || !r.Sealed {
		t.Fatalf("run %s sealed=%v, want cancelled and sealed", r.State, r.Sealed)
	}
	for _, task := range r.Tasks {
		if task.State != lifecycle.TaskCancelled {
			t.Errorf("task %s is %s, want cancelled", task.ID, task.State)
		}
	}
	close(block)
	time.Sleep(20 * time.Millisecond)
	if n := len(f.attempts()); n != 1 {
		t.Errorf("%d attempts fired, want 1", n)
	}
	if err := h.eng.Retry(t.Context(), api.ActionRequest{Run: id, Task: "a"}); !errors.Is(err, orch.ErrConflict) {
		t.Errorf("retry on a cancelled run: %v, want conflict (sealed)", err)
	}
}

func TestEngine_RetryCommandRevivesSkippedDependents(t *testing.T) {
	var mu sync.Mutex
	fail := true
	f := newFakeExec(func(a orch.Attempt) orch.Outcome {
		mu.Lock()
		defer mu.Unlock()
		if a.TaskID == "b" && fail {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "denied"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", f)
	id := h.submit(mkPlan(t, "retrycmd", 4, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}}, spec{ID: "c", Deps: []string{"b"}}))
	if r := h.wait(id); r.State != lifecycle.RunFailed {
		t.Fatalf("run %s, want failed", r.State)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if err := h.eng.Retry(t.Context(), api.ActionRequest{Run: id, Task: "b", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	r := h.wait(id)
	if diff := cmp.Diff(map[string]string{"a": "succeeded", "b": "succeeded", "c": "succeeded"}, taskStates(r)); diff != "" || r.State != lifecycle.RunSucceeded {
		t.Errorf("after retry: run %s (-want +got):\n%s", r.State, diff)
	}
}

// A run is identified by its name, plan and what it works on: only that identity returns the
// existing run; the same name with another plan or commit is a new run, and the name then
// means the newest.
func TestEngine_SubmitIdentityIsNamePlanAndCheckout(t *testing.T) {
	h := start(t, "", newFakeExec(succeed))
	p := mkPlan(t, "nightly", 1, spec{ID: "a"})
	co := orch.Checkout{Repo: "/src/app", Revision: strings.Repeat("a", 40)}
	id1, created, err := h.eng.Submit(t.Context(), p, co, "me")
	if err != nil || !created {
		t.Fatalf("first submit: %v created=%v", err, created)
	}
	id2, created, err := h.eng.Submit(t.Context(), mkPlan(t, "nightly", 1, spec{ID: "a"}), co, "me")
	if err != nil || created || id2 != id1 {
		t.Errorf("identical resubmit: id %s created=%v err=%v, want %s existing", id2, created, err, id1)
	}
	h.wait(id1)
	seen := map[string]bool{id1: true}
	for name, sub := range map[string]struct {
		p  *plan.Plan
		co orch.Checkout
	}{
		"another plan":      {mkPlan(t, "nightly", 1, spec{ID: "b"}), co},
		"another commit":    {p, orch.Checkout{Repo: co.Repo, Revision: strings.Repeat("b", 40)}},
		"another workspace": {p, orch.Checkout{Workspace: "app@sha256:" + strings.Repeat("c", 64), Revision: co.Revision}},
		"no checkout":       {p, orch.Checkout{}},
	} {
		id, created, err := h.eng.Submit(t.Context(), sub.p, sub.co, "me")
		if err != nil || !created || seen[id] {
			t.Errorf("%s: id %s created=%v err=%v, want a new run", name, id, created, err)
		}
		seen[id] = true
		h.wait(id)
		// Still after the run is sealed and gone from memory.
		again, created, err := h.eng.Submit(t.Context(), sub.p, sub.co, "me")
		if err != nil || created || again != id {
			t.Errorf("%s resubmitted after it ended: %s created=%v err=%v, want %s", name, again, created, err, id)
		}
	}
	newest, err := h.eng.Status(t.Context(), "nightly")
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := h.eng.Runs(t.Context(), 100)
	if len(runs) != 5 || newest.ID != runs[0].ID || newest.NameRuns != 5 {
		t.Errorf("the name means the newest run: got %s of %d; runs %d, newest %s", newest.ID, newest.NameRuns, len(runs), runs[0].ID)
	}
	if byID, err := h.eng.Status(t.Context(), id1); err != nil || byID.ID != id1 || byID.NameRuns != 0 {
		t.Errorf("status by id: %s name_runs %d, %v; want %s, 0", byID.ID, byID.NameRuns, err, id1)
	}
}

func TestEngine_ConcurrencyCapsRunningTasks(t *testing.T) {
	var mu sync.Mutex
	cur, peak := 0, 0
	f := newFakeExec(func(a orch.Attempt) orch.Outcome {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		cur--
		mu.Unlock()
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", f)
	var tasks []spec
	for i := range 12 {
		tasks = append(tasks, spec{ID: "t" + string(rune('a'+i))})
	}
	h.wait(h.submit(mkPlan(t, "cap", 3, tasks...)))
	if peak > 3 || peak < 2 {
		t.Errorf("peak running %d, want at most 3 (and parallelism)", peak)
	}
}

var _ = context.Background
