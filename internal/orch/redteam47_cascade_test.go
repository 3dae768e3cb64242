package orch_test

// Attacks on the bounded skip cascade and run cancel (cascade.go, ADR 0028) and on the
// in-commit fold that reads one record ahead (fold.go, ADR 0027).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/store"
)

// rtExec is an executor the test drives: decide answers an attempt at once (true) or holds it
// until the test finishes it or, with cancelAnswers, until the engine cancels it. It starts
// no goroutine of its own but those that hand an answer to the engine (they end when the
// engine takes it or stops).
type rtExec struct {
	mu            sync.Mutex
	decide        func(a orch.Attempt) (orch.Outcome, bool)
	cancelAnswers bool
	held          map[string]rtHeld // by dispatch id
	started       []orch.Attempt
	cancelled     map[string]bool // dispatch ids the engine cancelled
}

type rtHeld struct {
	a    orch.Attempt
	done func(orch.Outcome)
}

func newRTExec(decide func(a orch.Attempt) (orch.Outcome, bool)) *rtExec {
	return &rtExec{decide: decide, held: map[string]rtHeld{}, cancelled: map[string]bool{}}
}

func (x *rtExec) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.started = append(x.started, a)
	if o, now := x.decide(a); now {
		o.DispatchID = a.DispatchID
		go done(o)
		return
	}
	x.held[a.DispatchID] = rtHeld{a: a, done: done}
}

func (x *rtExec) Cancel(ctx context.Context, id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cancelled[id] = true
	if h, ok := x.held[id]; ok && x.cancelAnswers {
		delete(x.held, id)
		go h.done(orch.Outcome{DispatchID: id, State: lifecycle.TaskCancelled, Reason: "cancelled"})
	}
}

// take removes and returns the held attempt of task (of any run when run is "").
func (x *rtExec) take(run, task string) (rtHeld, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, h := range x.held {
		if h.a.TaskID == task && (run == "" || h.a.RunID == run) {
			delete(x.held, id)
			return h, true
		}
	}
	return rtHeld{}, false
}

// finish answers task's held attempt with o on a goroutine of its own.
func (x *rtExec) finish(t testing.TB, run, task string, o orch.Outcome) {
	t.Helper()
	h, ok := x.take(run, task)
	if !ok {
		t.Fatalf("no held attempt of task %s", task)
	}
	o.DispatchID = h.a.DispatchID
	go h.done(o)
}

// finishNow answers task's held attempt with o before it returns: the answer is queued to the
// engine (its queue has room) ahead of anything sent after. For the engine's goroutine.
func (x *rtExec) finishNow(run, task string, o orch.Outcome) bool {
	h, ok := x.take(run, task)
	if ok {
		o.DispatchID = h.a.DispatchID
		h.done(o)
	}
	return ok
}

func (x *rtExec) isHeld(run, task string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, h := range x.held {
		if h.a.TaskID == task && (run == "" || h.a.RunID == run) {
			return true
		}
	}
	return false
}

func (x *rtExec) waitHeld(t testing.TB, run string, tasks ...string) {
	t.Helper()
	for _, task := range tasks {
		if !agoratest.Poll(10*time.Second, func() bool { return x.isHeld(run, task) }) {
			t.Fatalf("task %s was never started", task)
		}
	}
}

// startedOf is how many attempts of task were started (of any run when run is "").
func (x *rtExec) startedOf(run, task string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, a := range x.started {
		if a.TaskID == task && (run == "" || a.RunID == run) {
			n++
		}
	}
	return n
}

func (x *rtExec) cancelledTask(run, task string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, a := range x.started {
		if a.TaskID == task && (run == "" || a.RunID == run) && x.cancelled[a.DispatchID] {
			return true
		}
	}
	return false
}

// rtObserver calls onBatch (on the engine's goroutine) with every committed batch.
type rtObserver struct {
	commitCount
	mu      sync.Mutex
	onBatch func(b orch.Batch)
}

func (o *rtObserver) Committed(b orch.Batch) {
	o.mu.Lock()
	f := o.onBatch
	o.mu.Unlock()
	if f != nil {
		f(b)
	}
}

func (o *rtObserver) set(f func(b orch.Batch)) {
	o.mu.Lock()
	o.onBatch = f
	o.mu.Unlock()
}

func countKind(b orch.Batch, kind string) int {
	n := 0
	for _, e := range b.Entries {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

var (
	rtFail = orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
	rtOK   = orch.Outcome{State: lifecycle.TaskSucceeded}
)

// waitEnded waits for run id to end, however long a loaded machine takes while the run
// moves ([harness.waitMoving]): the runs here end tasks all the time, so one whose state and
// counts stand still for stall is stuck, not slow.
func waitEnded(t *testing.T, h *harness, id string, stall time.Duration) api.Run {
	t.Helper()
	return h.waitMoving(id, stall, func(r api.Run) bool { return lifecycle.RunEnded(r.State) })
}

// twoRootSpecs is two roots, ra and rb, wide tasks under each (ra-I, rb-I), and both tasks
// under one of each (both-I, after ra-I and rb-I).
func twoRootSpecs(wide, both int) []spec {
	var specs []spec
	for _, root := range []string{"ra", "rb"} {
		specs = append(specs, spec{ID: root})
		for i := range wide {
			specs = append(specs, spec{ID: fmt.Sprintf("%s-%d", root, i), Deps: []string{root}})
		}
	}
	for i := range both {
		specs = append(specs, spec{ID: fmt.Sprintf("both-%d", i), Deps: []string{fmt.Sprintf("ra-%d", i), fmt.Sprintf("rb-%d", i)}})
	}
	return specs
}

// entryCounts counts run id's audit entries of kind by task subject.
func entryCounts(t *testing.T, h *harness, id, kind string) map[string]int {
	t.Helper()
	rows, err := h.db.SQL().Query(`SELECT subject, COUNT(*) FROM audit_entries WHERE kind = ? AND subject LIKE ? GROUP BY subject`,
		kind, "run/"+id+"/%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(s, "run/"+id+"/task/")] = n
	}
	return out
}

// runEntries counts run id's own entries of kind (orch.run.ended ...).
func runEntries(t *testing.T, h *harness, id, kind string) int {
	t.Helper()
	var n int
	if err := h.db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries WHERE kind = ? AND subject = ?`, kind, "run/"+id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRedTeam47_RetryMidCascadeLeavesNoTaskASecondFailureHolds: root A fails and its
// cascade skips p (which also depends on Z) and the first of p's 10,000 dependents; Z then
// fails, and A is retried while the cascade goes on. The retry leaves p skipped (Z failed) and
// drops A's cascade (its root no longer failed), and Z's cascade finds p skipped already and
// stops there: only the dropped cascade's stack leads to p's other dependents. Safe: they are
// skipped naming Z (reroot), and the run ends failed with each of them skipped once.
func TestRedTeam47_RetryMidCascadeLeavesNoTaskASecondFailureHolds(t *testing.T) {
	const n = 5 * orch.CascadeBatch
	specs := []spec{{ID: "a"}, {ID: "z"}, {ID: "p", Deps: []string{"a", "z"}}}
	for i := range n {
		specs = append(specs, spec{ID: fmt.Sprintf("q%d", i), Deps: []string{"p"}})
	}
	var amu sync.Mutex
	aStarts := 0
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		switch a.TaskID {
		case "a":
			amu.Lock()
			defer amu.Unlock()
			aStarts++
			return rtOK, aStarts > 1 // the first attempt is held (and failed), the retry succeeds
		case "z":
			return orch.Outcome{}, false
		}
		return rtOK, true
	})
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47-orphans", 2, specs...))
	exec.waitHeld(t, id, "a", "z")

	retried := make(chan error, 1)
	var mu sync.Mutex
	skipped, skippedAtRetry := 0, -1
	obs.set(func(b orch.Batch) {
		mu.Lock()
		defer mu.Unlock()
		first := skipped == 0
		skipped += countKind(b, entry.TaskSkipped)
		if countKind(b, entry.TaskRetried) > 0 {
			skippedAtRetry = skipped
		}
		if first && skipped > 0 {
			// After A's first batch of skips: Z fails (queued now, ahead of the retry), then A
			// is retried while A's cascade goes on.
			exec.finishNow(id, "z", rtFail)
			go func() {
				retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "a", Actor: "me"})
			}()
			waitQueued(t, h.eng, 2)
		}
	})
	exec.finish(t, id, "a", rtFail)
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	at := skippedAtRetry
	mu.Unlock()
	if at < 0 || at >= n+1 {
		t.Fatalf("the retry came after %d skips of %d: it did not meet A's cascade", at, n+1)
	}
	r := waitEnded(t, h, id, 5*time.Second)
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != n+1 {
		t.Errorf("run %s with %v, want failed with p and its %d dependents skipped", r.State, r.Counts, n)
	}
}

// barrier returns once the engine has committed every batch before the call's: a stats
// command is answered in the batch that takes it, before its commit, so two are.
func barrier(t *testing.T, h *harness) {
	t.Helper()
	for range 2 {
		if _, err := h.eng.Stats(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedTeam47_RetryOntoADeadDependencyIsRefused: task s, waiting for a, is cancelled; a then
// fails. Retrying s would leave it pending on a task that never succeeds, a state load reads
// as a cascade a crash cut short (it would skip s and end the run again at the next start).
// The retry is refused, naming a and that a is to be retried first; a restart then changes
// nothing: s stays cancelled, no skip entry, no second orch.run.ended. Once a is retried, s's
// retry is taken.
func TestRedTeam47_RetryOntoADeadDependencyIsRefused(t *testing.T) {
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return orch.Outcome{}, false })
	h := start(t, "", exec)
	id := h.submit(mkPlan(t, "rt47-retried-waits", 1, spec{ID: "a"}, spec{ID: "s", Deps: []string{"a"}}))
	exec.waitHeld(t, id, "a")
	ctx := context.Background()
	if err := h.eng.Cancel(ctx, api.ActionRequest{Run: id, Task: "s", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	exec.finish(t, id, "a", rtFail)
	waitEnded(t, h, id, 10*time.Second)
	err := h.eng.Retry(ctx, api.ActionRequest{Run: id, Task: "s", Actor: "me"})
	if !errors.Is(err, orch.ErrConflict) || !strings.Contains(err.Error(), "depends on a") || !strings.Contains(err.Error(), "retry a first") {
		t.Fatalf("retry of s waiting on the failed a: %v, want a conflict naming a", err)
	}
	before, err := h.eng.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ended := runEntries(t, h, id, entry.RunEnded)
	h.stop()

	h = start(t, h.path, newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true }))
	barrier(t, h)
	after, err := h.eng.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := taskStates(after)["s"]; got != lifecycle.TaskCancelled || after.State != before.State {
		t.Errorf("after a restart alone: s is %s and the run %s; before it s was cancelled and the run %s", got, after.State, before.State)
	}
	if n := entryCounts(t, h, id, entry.TaskSkipped)["s"]; n != 0 {
		t.Errorf("the restart skipped s (%d skip entries)", n)
	}
	if n := runEntries(t, h, id, entry.RunEnded); n != ended {
		t.Errorf("%d orch.run.ended entries after the restart, %d before it", n, ended)
	}
	if err := h.eng.Retry(ctx, api.ActionRequest{Run: id, Task: "a", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := h.eng.Retry(ctx, api.ActionRequest{Run: id, Task: "s", Actor: "me"}); err != nil {
		t.Fatalf("retry of s once a was retried: %v", err)
	}
}

// TestRedTeam47_StopBetweenRunCancelBatchesStillCancelsRunningTasks: a run's cancel takes
// its held task g and 2,048 waiting tasks in its first batch; two more running tasks come
// after them in the run, so the cancel has still to ask their dispatches to stop. The engine
// stops there, with no task left pending. Safe: the engine opened next goes on with the
// cancel all the same (r1 and r2 run with their dispatches not told), cancels them, and the
// run ends cancelled.
func TestRedTeam47_StopBetweenRunCancelBatchesStillCancelsRunningTasks(t *testing.T) {
	specs := []spec{{ID: "g"}}
	for i := range orch.CascadeBatch {
		specs = append(specs, spec{ID: fmt.Sprintf("w%d", i), Deps: []string{"g"}})
	}
	specs = append(specs, spec{ID: "r1"}, spec{ID: "r2"})
	hold := func(a orch.Attempt) (orch.Outcome, bool) { return orch.Outcome{}, false }
	exec := newRTExec(hold)
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47-cancel-cut", 3, specs...))
	exec.waitHeld(t, id, "g", "r1", "r2")
	var once sync.Once
	obs.set(func(b orch.Batch) {
		if countKind(b, entry.TaskCancelled) > 0 {
			once.Do(h.cancel) // a crash right after the cancel's first batch
		}
	})
	if err := h.eng.Cancel(context.Background(), api.ActionRequest{Run: id, Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	h.stopped()
	db := openDB(t, h.path)
	var pending, cancelFlags int
	db.SQL().QueryRow(`SELECT COUNT(*) FROM tasks WHERE run_id = ? AND state IN ('pending', 'ready', 'needs_input')`, id).Scan(&pending)
	db.SQL().QueryRow(`SELECT COUNT(*) FROM tasks WHERE run_id = ? AND state = 'running' AND cancel`, id).Scan(&cancelFlags)
	db.Close()
	t.Logf("after the stop: %d tasks waiting, %d running tasks marked cancelled (of g, r1, r2)", pending, cancelFlags)

	// The dispatches live on: g's knows its cancel (it answers so when re-attached), r1's
	// and r2's run until the engine cancels them.
	exec = newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID == "g" {
			return orch.Outcome{State: lifecycle.TaskCancelled, Reason: "cancelled"}, true
		}
		return orch.Outcome{}, false
	})
	exec.cancelAnswers = true
	h = start(t, h.path, exec)
	ok := agoratest.Poll(5*time.Second, func() bool { return exec.cancelledTask(id, "r1") && exec.cancelledTask(id, "r2") })
	if !ok {
		r, _ := h.eng.Status(context.Background(), id)
		t.Fatalf("the engine opened again never cancelled r1 (%v) and r2 (%v), running in a run whose cancel was asked: run %s with %v",
			exec.cancelledTask(id, "r1"), exec.cancelledTask(id, "r2"), r.State, r.Counts)
	}
	r := waitEnded(t, h, id, 10*time.Second)
	if r.State != lifecycle.RunCancelled || r.Counts[lifecycle.TaskCancelled] != len(specs) {
		t.Errorf("run %s with %v, want cancelled with every task", r.State, r.Counts)
	}
}

// skipAncestors reads run id's skip entries: the ancestor each skipped task names, and how many
// skip entries it has.
func skipAncestors(t *testing.T, h *harness, id string) (map[string]string, map[string]int) {
	t.Helper()
	rows, err := h.db.SQL().Query(`SELECT subject, entry FROM audit_entries WHERE kind = ? AND subject LIKE ? ORDER BY seq`,
		entry.TaskSkipped, "run/"+id+"/task/%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names, n := map[string]string{}, map[string]int{}
	for rows.Next() {
		var s, body string
		if err := rows.Scan(&s, &body); err != nil {
			t.Fatal(err)
		}
		task := strings.TrimPrefix(s, "run/"+id+"/task/")
		n[task]++
		i := strings.Index(body, `"ancestor":"`)
		if i < 0 {
			t.Fatalf("%s's skip entry names no ancestor: %s", s, body)
		}
		rest := body[i+len(`"ancestor":"`):]
		names[task] = rest[:strings.IndexByte(rest, '"')]
	}
	return names, n
}

// firedAfter counts run id's orch.task.fired entries recorded after its first entry of kind.
func firedAfter(t *testing.T, h *harness, id, kind string) int {
	t.Helper()
	var n int
	err := h.db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries WHERE kind = ? AND subject LIKE ? AND seq >
		(SELECT MIN(seq) FROM audit_entries WHERE kind = ? AND subject LIKE ?)`,
		entry.TaskFired, "run/"+id+"/%", kind, "run/"+id+"%").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRedTeam47_NothingFiresUnderAFailedAncestorMidCascade: a fails with 6,000 tasks to skip
// (m_j under a, k_j under m_j and an independent task i, under locks); i succeeds while the
// cascade goes on, which counts toward every k_j, and l (under i alone) runs. No task under
// a fires, each is skipped once naming a, and the run ends failed once.
func TestRedTeam47_NothingFiresUnderAFailedAncestorMidCascade(t *testing.T) {
	const n = 3000
	specs := []spec{{ID: "a"}, {ID: "i"}, {ID: "l", Deps: []string{"i"}}}
	for j := range n {
		specs = append(specs, spec{ID: fmt.Sprintf("m%d", j), Deps: []string{"a"}})
	}
	for j := range n {
		specs = append(specs, spec{ID: fmt.Sprintf("k%d", j), Deps: []string{fmt.Sprintf("m%d", j), "i"},
			Locks: []any{map[string]any{"name": fmt.Sprintf("lk%d", j%7), "mode": "exclusive"}},
			Retry: map[string]any{"max_attempts": 3, "initial_backoff": "1ms", "max_backoff": "1ms"}})
	}
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID == "a" || a.TaskID == "i" {
			return orch.Outcome{}, false
		}
		return rtOK, true
	})
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47-no-fire", 4, specs...))
	exec.waitHeld(t, id, "a", "i")
	var once sync.Once
	var iEarly bool
	obs.set(func(b orch.Batch) {
		if countKind(b, entry.TaskSkipped) > 0 {
			once.Do(func() { iEarly = exec.finishNow(id, "i", rtOK) })
		}
	})
	exec.finish(t, id, "a", rtFail)
	r := waitEnded(t, h, id, 20*time.Second)
	if !iEarly {
		t.Fatal("i was not answered during the cascade")
	}
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*n || r.Counts[lifecycle.TaskSucceeded] != 2 {
		t.Errorf("run %s with %v, want failed with %d skipped, i and l succeeded", r.State, r.Counts, 2*n)
	}
	for _, task := range []string{"m0", "k0", fmt.Sprintf("k%d", n-1)} {
		if k := exec.startedOf(id, task); k != 0 {
			t.Errorf("task %s, under failed a, was fired %d times", task, k)
		}
	}
	exec.mu.Lock()
	started := len(exec.started)
	exec.mu.Unlock()
	if started != 3 {
		t.Errorf("%d attempts started, want a, i and l alone", started)
	}
	names, skips := skipAncestors(t, h, id)
	for task, k := range skips {
		if k != 1 || names[task] != "a" {
			t.Errorf("%s skipped %d times, naming %s", task, k, names[task])
		}
	}
	if k := runEntries(t, h, id, entry.RunEnded); k != 1 {
		t.Errorf("%d orch.run.ended entries, want 1", k)
	}
}

// TestRedTeam47_RunCancelAndAnswerMidCascade: a fails with 6,000 tasks to skip; while the
// cascade goes on the run is cancelled, then the task that asked a question is answered (it
// must be refused) and a running task x ends succeeded (its dependent y must not fire). Every
// task ends once (skipped or cancelled), nothing fires after the cancel was asked, and the
// run ends cancelled once.
func TestRedTeam47_RunCancelAndAnswerMidCascade(t *testing.T) {
	specs := append(cascadeSpecs(3000), spec{ID: "ask"}, spec{ID: "x"}, spec{ID: "y", Deps: []string{"x"}},
		spec{ID: "after-ask", Deps: []string{"ask"}})
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		switch a.TaskID {
		case "root", "x":
			return orch.Outcome{}, false
		case "ask":
			if a.Answer == "" {
				return orch.Outcome{State: lifecycle.TaskNeedsInput, Question: "which?"}, true
			}
		}
		return rtOK, true
	})
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47-cancel-mid", 8, specs...))
	exec.waitHeld(t, id, "root", "x")
	h.waitTask(id, "ask", lifecycle.TaskNeedsInput)
	type result struct{ cancel, answer error }
	res := make(chan result, 1)
	var once sync.Once
	var mu sync.Mutex
	skipped, skippedAtCancel := 0, -1
	obs.set(func(b orch.Batch) {
		mu.Lock()
		skipped += countKind(b, entry.TaskSkipped)
		if countKind(b, entry.RunCancelRequested) > 0 {
			skippedAtCancel = skipped
		}
		mu.Unlock()
		if countKind(b, entry.TaskSkipped) > 0 {
			once.Do(func() {
				go func() {
					ctx := context.Background()
					var out result
					out.cancel = h.eng.Cancel(ctx, api.ActionRequest{Run: id, Actor: "me"})
					out.answer = h.eng.Answer(ctx, api.ActionRequest{Run: id, Task: "ask", Answer: "this", Actor: "me"})
					if !exec.finishNow(id, "x", rtOK) {
						out.answer = fmt.Errorf("x was not held")
					}
					res <- out
				}()
				waitQueued(t, h.eng, 1) // the cancel; the answer follows its reply
			})
		}
	})
	exec.finish(t, id, "root", rtFail)
	out := <-res
	if out.cancel != nil {
		t.Fatal(out.cancel)
	}
	if out.answer == nil {
		t.Error("an answer to a task of a run whose cancel was asked was taken")
	}
	mu.Lock()
	at := skippedAtCancel
	mu.Unlock()
	if at < 0 || at >= 2*3000 {
		t.Fatalf("the cancel came after %d skips: it did not meet the cascade", at)
	}
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunCancelled {
		t.Errorf("run %s with %v, want cancelled", r.State, r.Counts)
	}
	if k := firedAfter(t, h, id, entry.RunCancelRequested); k != 0 {
		t.Errorf("%d tasks fired after the run's cancel was asked", k)
	}
	skips, cancels := entryCounts(t, h, id, entry.TaskSkipped), entryCounts(t, h, id, entry.TaskCancelled)
	for _, s := range specs {
		if s.ID == "root" || s.ID == "x" {
			continue
		}
		if skips[s.ID]+cancels[s.ID] != 1 {
			t.Errorf("task %s: %d skip and %d cancel entries, want one of them", s.ID, skips[s.ID], cancels[s.ID])
		}
	}
	if k := runEntries(t, h, id, entry.RunEnded); k != 1 {
		t.Errorf("%d orch.run.ended entries, want 1", k)
	}
}

// TestRedTeam47_RetryFailAgainStopMidSecondCascade: root fails; its cascade of 10,000 is
// under way when root is retried; the retried attempt fails again, and the engine stops
// after the first batch of the second cascade; the engine opened next goes on. Every
// dependent ends skipped, one skip more than its unskips, naming root; no dependent fires; the
// run ends failed once.
func TestRedTeam47_RetryFailAgainStopMidSecondCascade(t *testing.T) {
	const wide = 5000
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID == "root" {
			return orch.Outcome{}, false
		}
		return rtOK, true
	})
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47-refail", 50, cascadeSpecs(wide)...))
	exec.waitHeld(t, id, "root")
	retried := make(chan error, 1)
	var mu sync.Mutex
	phase, skippedAtRetry, skipped := 0, -1, 0
	obs.set(func(b orch.Batch) {
		mu.Lock()
		defer mu.Unlock()
		k := countKind(b, entry.TaskSkipped)
		skipped += k
		if countKind(b, entry.TaskRetried) > 0 {
			skippedAtRetry = skipped - k
		}
		switch {
		case phase == 0 && k > 0:
			phase = 1
			go func() {
				retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "root", Actor: "me"})
			}()
			waitQueued(t, h.eng, 1)
		case phase == 2 && k > 0:
			phase = 3
			h.cancel() // a crash after the second cascade's first batch
		}
	})
	exec.finish(t, id, "root", rtFail)
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	exec.waitHeld(t, id, "root")
	mu.Lock()
	if skippedAtRetry < 0 || skippedAtRetry >= 2*wide {
		mu.Unlock()
		t.Fatalf("the retry came after %d skips: it did not meet the cascade", skippedAtRetry)
	}
	phase = 2
	mu.Unlock()
	exec.finish(t, id, "root", rtFail)
	h.stopped()
	db := openDB(t, h.path)
	var pending int
	db.SQL().QueryRow(`SELECT COUNT(*) FROM tasks WHERE run_id = ? AND state = 'pending'`, id).Scan(&pending)
	db.Close()
	if pending == 0 {
		t.Fatal("no task was left pending by the stop: the second cascade was not cut")
	}
	h = start(t, h.path, newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true }))
	r := waitEnded(t, h, id, 20*time.Second)
	checkRetriedCascade(t, h, id, r, 2*wide, 2)
}

// TestRedTeam47_TwoRootsTwoRunsStopMidCascade: two runs, each with two roots of 2,500
// dependents each and 500 tasks under both, have all four roots fail at once; the engine
// stops after the first batch of skips, and the engine opened next goes on. Every task is
// skipped once, naming a root it is under (the one it is under alone, when it is), nothing
// but the roots fires, and each run ends failed once.
func TestRedTeam47_TwoRootsTwoRunsStopMidCascade(t *testing.T) {
	const wide, both = 2500, 500
	specs := twoRootSpecs(wide, both)
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return orch.Outcome{}, false })
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	ids := []string{h.submit(mkPlan(t, "rt47-two-1", 4, specs...)), h.submit(mkPlan(t, "rt47-two-2", 4, specs...))}
	for _, id := range ids {
		exec.waitHeld(t, id, "ra", "rb")
	}
	var once sync.Once
	failed := 0
	obs.set(func(b orch.Batch) {
		failed += countKind(b, entry.TaskFailed)
		if failed == 4 && countKind(b, entry.TaskSkipped) > 0 {
			once.Do(h.cancel) // a crash after a batch of skips, every root's end committed
		}
	})
	for _, id := range ids {
		for _, root := range []string{"ra", "rb"} {
			exec.finish(t, id, root, rtFail)
		}
	}
	h.stopped()
	db := openDB(t, h.path)
	var pending int
	db.SQL().QueryRow(`SELECT COUNT(*) FROM tasks WHERE state = 'pending'`).Scan(&pending)
	db.Close()
	if pending == 0 {
		t.Fatal("no task was left pending by the stop: the cascades were not cut")
	}
	exec = newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true })
	h = start(t, h.path, exec)
	for _, id := range ids {
		r := waitEnded(t, h, id, 20*time.Second)
		if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*wide+both {
			t.Errorf("run %s %s with %v, want failed with %d skipped", id, r.State, r.Counts, 2*wide+both)
		}
		names, skips := skipAncestors(t, h, id)
		bad := 0
		for task, k := range skips {
			ok := k == 1
			switch {
			case strings.HasPrefix(task, "both-"):
				ok = ok && (names[task] == "ra" || names[task] == "rb")
			default:
				ok = ok && strings.HasPrefix(task, names[task]+"-")
			}
			if !ok {
				if bad++; bad < 5 {
					t.Errorf("run %s: %s skipped %d times, naming %s", id, task, k, names[task])
				}
			}
		}
		if k := runEntries(t, h, id, entry.RunEnded); k != 1 {
			t.Errorf("run %s: %d orch.run.ended entries, want 1", id, k)
		}
	}
	exec.mu.Lock()
	defer exec.mu.Unlock()
	if len(exec.started) != 0 {
		t.Errorf("the engine opened again fired %d attempts, the first %s", len(exec.started), exec.started[0].TaskID)
	}
}

// TestRedTeam47_CancelATaskTheCascadeHasStillToSkip: root fails with 6,000 dependents; while
// the cascade goes on, a0 (among the last it reaches) is cancelled. It ends cancelled, its
// dependent b0 skipped naming it; every other task is skipped once naming root; the run ends
// failed once.
func TestRedTeam47_CancelATaskTheCascadeHasStillToSkip(t *testing.T) {
	const wide = 3000
	specs := []spec{{ID: "root"}}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("a%d", i), Deps: []string{"root"}})
	}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("b%d", i), Deps: []string{fmt.Sprintf("a%d", i)}})
	}
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return orch.Outcome{}, false })
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47-cancel-one", 4, specs...))
	exec.waitHeld(t, id, "root")
	res := make(chan error, 1)
	var once sync.Once
	obs.set(func(b orch.Batch) {
		if countKind(b, entry.TaskSkipped) > 0 {
			once.Do(func() {
				go func() { res <- h.eng.Cancel(context.Background(), api.ActionRequest{Run: id, Task: "a0", Actor: "me"}) }()
				// After the cascade's first batch: the engine applies the cancel after its
				// next one, before the one that reaches a0 (the last).
				waitQueued(t, h.eng, 1)
			})
		}
	})
	exec.finish(t, id, "root", rtFail)
	if err := <-res; err != nil {
		t.Fatalf("cancel of a0 while the cascade goes on: %v (the cascade reached it first?)", err)
	}
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*wide-1 || r.Counts[lifecycle.TaskCancelled] != 1 {
		t.Errorf("run %s with %v, want failed, a0 cancelled and %d skipped", r.State, r.Counts, 2*wide-1)
	}
	names, skips := skipAncestors(t, h, id)
	for task, k := range skips {
		want := "root"
		if task == "b0" {
			want = "a0"
		}
		if k != 1 || names[task] != want {
			t.Errorf("%s skipped %d times naming %s, want once naming %s", task, k, names[task], want)
		}
	}
	if k := entryCounts(t, h, id, entry.TaskCancelled)["a0"]; k != 1 || skips["a0"] != 0 {
		t.Errorf("a0: %d cancel and %d skip entries, want one cancel", k, skips["a0"])
	}
	if k := runEntries(t, h, id, entry.RunEnded); k != 1 {
		t.Errorf("%d orch.run.ended entries, want 1", k)
	}
}

// rtUsage is the usage an attempt's dispatch reports, the same whenever it is asked.
func rtUsage(dispatch string) *budget.Usage {
	h := fnv.New32a()
	h.Write([]byte(dispatch))
	v := int64(h.Sum32() % 1000)
	return &budget.Usage{InputTokens: 1 + v, OutputTokens: 2 + v%17, ModelCalls: 1 + v%3, CostUSD: float64(v) / 1000}
}

// foldPlan is a layered plan of n tasks, some with retries, and a task bad whose 40
// dependents a failure of it skips.
func foldPlan(t *testing.T, name string, n int) []spec {
	specs := []spec{{ID: "bad"}}
	for i := range 40 {
		specs = append(specs, spec{ID: fmt.Sprintf("under%d", i), Deps: []string{"bad"}})
	}
	for i := range n {
		s := spec{ID: fmt.Sprintf("t%d", i), Retry: map[string]any{"max_attempts": 2, "initial_backoff": "1ms", "max_backoff": "1ms"}}
		if i >= 10 {
			s.Deps = []string{fmt.Sprintf("t%d", (i*7)%i), fmt.Sprintf("t%d", i-1-(i%5))}
			if s.Deps[0] == s.Deps[1] {
				s.Deps = s.Deps[:1]
			}
		}
		specs = append(specs, s)
	}
	return specs
}

// foldDecide answers an attempt at once with its usage: bad fails, every seventh task's
// first attempt fails (and is retried), the rest succeed.
func foldDecide(a orch.Attempt) (orch.Outcome, bool) {
	u := rtUsage(a.DispatchID)
	var i int
	fmt.Sscanf(a.TaskID, "t%d", &i)
	switch {
	case a.TaskID == "bad":
		return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1", Usage: u}, true
	case a.Number == 1 && strings.HasPrefix(a.TaskID, "t") && i%7 == 3:
		return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonWorkerFailed, Detail: "worker died", Usage: u}, true
	}
	return orch.Outcome{State: lifecycle.TaskSucceeded, Usage: u}, true
}

// checkAttemptRows checks, after every record is folded, that no attempt of run id is left
// live and that each carries its dispatch's usage once; it returns their usage summed.
func checkAttemptRows(t *testing.T, db *sql.DB, id string) budget.Usage {
	t.Helper()
	rows, err := db.Query(`SELECT dispatch_id, state, usage FROM attempts WHERE run_id = ?`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sum budget.Usage
	for rows.Next() {
		var d, state, usage string
		if err := rows.Scan(&d, &state, &usage); err != nil {
			t.Fatal(err)
		}
		if state == lifecycle.AttemptLive {
			t.Errorf("attempt %s is still live in a run that ended", d)
		}
		want := rtUsage(d)
		var got budget.Usage
		if err := json.Unmarshal([]byte(usage), &got); err != nil || got != *want {
			t.Errorf("attempt %s's usage %q, its dispatch reported %+v", d, usage, *want)
		}
		sum = sum.Add(*want)
	}
	return sum
}

// TestRedTeam47_FoldEveryCommitReadersAgree folds two records in every commit past the
// fourth (reading one ahead) while a reader reads the run: every snapshot (one read
// transaction, the overlay applied) holds together, the usage a Reader sums never goes
// back, and at the end it is what the attempts reported, as Status says, after the engine
// stopped and folded, and after it opened again.
func TestRedTeam47_FoldEveryCommitReadersAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch.db")
	h := startFolding(t, path, newRTExec(foldDecide), nil)
	specs := foldPlan(t, "rt47-fold", 300)
	id := h.submit(mkPlan(t, "rt47-fold", 3, specs...))

	ro, err := store.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rd := orch.NewReader(ro.SQL())
	var last budget.Usage
	reads, unfolded := 0, 0
	var problems []string
	for {
		st, err := h.eng.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		ended := lifecycle.RunEnded(st.State)
		s, err := orch.Snapshot(context.Background(), ro.SQL(), id, entry.TaskFired, entry.TaskSucceeded, entry.Task(id, ""), entry.Task(id, "")+"\xff")
		if err != nil {
			t.Fatal(err)
		}
		reads++
		if s.Unfolded > 0 {
			unfolded++
		}
		perTask := map[int]int{}
		for _, a := range s.Attempts {
			perTask[a.TaskIdx]++
		}
		for idx, tk := range s.Tasks {
			a, ok := s.Attempts[tk.DispatchID]
			switch {
			case perTask[idx] != tk.Attempts:
				problems = append(problems, fmt.Sprintf("task %s: %d attempts, %d attempt rows", tk.ID, tk.Attempts, perTask[idx]))
			case tk.State == lifecycle.TaskRunning && (!ok || a.State != lifecycle.AttemptLive):
				problems = append(problems, fmt.Sprintf("task %s running, its attempt %+v", tk.ID, a))
			case tk.State != lifecycle.TaskRunning && ok && a.State == lifecycle.AttemptLive:
				problems = append(problems, fmt.Sprintf("task %s %s, its attempt live", tk.ID, tk.State))
			}
		}
		if s.Fired != len(s.Attempts) {
			problems = append(problems, fmt.Sprintf("%d fired entries, %d attempt rows", s.Fired, len(s.Attempts)))
		}
		counts, total, err := rd.Counts(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, c := range counts {
			sum += c
		}
		if sum != len(specs) || total != len(specs) {
			problems = append(problems, fmt.Sprintf("Counts %v, total %d, want %d tasks", counts, total, len(specs)))
		}
		u, err := rd.Usage(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var got budget.Usage
		if u != nil {
			got = *u
		}
		if got.InputTokens < last.InputTokens || got.ModelCalls < last.ModelCalls {
			problems = append(problems, fmt.Sprintf("usage went back from %+v to %+v", last, got))
		}
		last = got
		if len(problems) > 5 || ended {
			break
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	st, err := h.eng.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != lifecycle.RunFailed || st.Counts[lifecycle.TaskSkipped] != 40 {
		t.Errorf("run %s with %v, want failed with bad's 40 dependents skipped", st.State, st.Counts)
	}
	u, err := rd.Usage(context.Background(), id)
	if err != nil || u == nil || st.Usage == nil || *u != *st.Usage {
		t.Errorf("at the end the Reader sums %+v (%v), Status %+v", u, err, st.Usage)
	}
	if unfolded == 0 {
		t.Errorf("none of %d reads found a record unfolded: the overlay was never read", reads)
	}
	t.Logf("%d reads, %d with records unfolded", reads, unfolded)
	checkFolded(t, h, id, u)
}

// TestRedTeam47_FoldStopAnywhereUsageOnce stops the engine after its k-th commit (folds in
// every commit past the fourth record, one read ahead: some attempts written ended before
// their end's record is folded), opens it again, re-attaches what was running (each dispatch
// reports the same usage again) and runs to the end: every attempt ends with its dispatch's
// usage once, none live, and run_usage, the Reader and Status agree with them.
func TestRedTeam47_FoldStopAnywhereUsageOnce(t *testing.T) {
	for _, k := range []int{6, 11, 17} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orch.db")
			open := func(obs orch.Observer) *harness { return startFolding(t, path, newRTExec(foldDecide), obs) }
			obs := &rtObserver{}
			h := open(obs)
			commits, early := 0, false
			obs.set(func(b orch.Batch) {
				commits++
				if commits == k || (commits < k && countKind(b, entry.RunEnded) > 0) {
					early = commits < k
					h.cancel()
				}
			})
			id := h.submit(mkPlan(t, "rt47-fold-stop", 2, foldPlan(t, "rt47-fold-stop", 120)...))
			h.stopped()
			if early {
				t.Fatalf("the run ended in fewer than %d commits", k)
			}
			h = open(nil)
			st := waitEnded(t, h, id, 20*time.Second)
			rd := orch.NewReader(h.db.SQL())
			u, err := rd.Usage(context.Background(), id)
			if err != nil || u == nil || st.Usage == nil || *u != *st.Usage {
				t.Errorf("the Reader sums %+v (%v), Status %+v", u, err, st.Usage)
			}
			checkFolded(t, h, id, u)
		})
	}
}

// TestRedTeam47_RetryIntoASpentBudgetMidCascade: root's attempt spends the run's budget and
// fails; while its cascade of 10,000 goes on, root is retried, and fails again in the same
// batch without firing (the budget is spent): the first cascade is not dropped (its root
// failed again) and a second starts. Every dependent ends skipped, one skip more than its
// unskips; nothing but root's first attempt fires; the run ends failed once.
func TestRedTeam47_RetryIntoASpentBudgetMidCascade(t *testing.T) {
	const wide = 5000
	specs := []spec{{ID: "root"}}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("a%d", i), Deps: []string{"root"}})
	}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("b%d", i), Deps: []string{fmt.Sprintf("a%d", i)}})
	}
	for i := range specs {
		specs[i].Sub = "worker"
	}
	doc, _ := json.Marshal(map[string]any{"version": 1, "name": "rt47-budget", "concurrency": 4,
		"budget": map[string]any{"model_calls": 1, "usd": 1}, "tasks": specs})
	p, err := plan.Parse("rt47-budget.json", doc)
	if err != nil {
		t.Fatal(err)
	}
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID == "root" && a.Number == 1 {
			return orch.Outcome{}, false
		}
		return rtOK, true
	})
	obs := &rtObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(p)
	exec.waitHeld(t, id, "root")
	retried := make(chan error, 1)
	var mu sync.Mutex
	skipped, skippedAtRetry := 0, -1
	obs.set(func(b orch.Batch) {
		mu.Lock()
		defer mu.Unlock()
		k := countKind(b, entry.TaskSkipped)
		first := skipped == 0 && k > 0
		skipped += k
		if countKind(b, entry.TaskRetried) > 0 {
			skippedAtRetry = skipped - k
		}
		if first {
			go func() {
				retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "root", Actor: "me"})
			}()
			waitQueued(t, h.eng, 1)
		}
	})
	o := rtFail
	o.Usage = &budget.Usage{ModelCalls: 1, InputTokens: 10}
	exec.finish(t, id, "root", o)
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	r := waitEnded(t, h, id, 20*time.Second)
	mu.Lock()
	at := skippedAtRetry
	mu.Unlock()
	if at < 0 || at >= 2*wide {
		t.Fatalf("the retry came after %d skips: it did not meet the cascade", at)
	}
	checkRetriedCascade(t, h, id, r, 2*wide, 1)
}

// checkRetriedCascade checks a run whose root failed, was retried while its cascade went on
// and failed again: it ended failed once with skipped tasks skipped, each skipped once more
// than unskipped, the last time naming root, and root fired fires times, alone.
func checkRetriedCascade(t *testing.T, h *harness, id string, r api.Run, skipped, fires int) {
	t.Helper()
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != skipped {
		t.Errorf("run %s with %v, want failed with %d skipped", r.State, r.Counts, skipped)
	}
	names, skips := skipAncestors(t, h, id)
	unskips := entryCounts(t, h, id, entry.TaskUnskipped)
	bad := 0
	for task, k := range skips {
		if k != unskips[task]+1 || names[task] != "root" {
			if bad++; bad < 5 {
				t.Errorf("%s: %d skips, %d unskips, last naming %s", task, k, unskips[task], names[task])
			}
		}
	}
	if k := entryCounts(t, h, id, entry.TaskFired); len(k) != 1 || k["root"] != fires {
		t.Errorf("fired entries %v, want root's %d alone", k, fires)
	}
	if k := runEntries(t, h, id, entry.RunEnded); k != 1 {
		t.Errorf("%d orch.run.ended entries, want 1", k)
	}
}

// checkFolded stops h's engine (which folds every record) and checks run id's folded rows:
// each attempt's usage once (checkAttemptRows), run_counts and run_usage against a recount,
// and read, the usage the Reader summed while the engine ran (nil: none read).
func checkFolded(t *testing.T, h *harness, id string, read *budget.Usage) {
	t.Helper()
	h.stop()
	db := openDB(t, h.path)
	want := checkAttemptRows(t, db.SQL(), id)
	checkTables(t, db.SQL(), id)
	db.Close()
	want.CostUSD = math.Round(want.CostUSD*1e9) / 1e9
	if read != nil && *read != want {
		t.Errorf("the Reader summed %+v; the folded attempts hold %+v", *read, want)
	}
}
