package orch_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// skipObserver counts the entries of kind (orch.task.skipped when "") of each committed
// batch, and calls onSkips (once) after the first batch that holds some.
type skipObserver struct {
	commitCount
	kind    string
	mu      sync.Mutex
	batches []int
	onSkips func()
}

func (o *skipObserver) Committed(b orch.Batch) {
	kind := o.kind
	if kind == "" {
		kind = entry.TaskSkipped
	}
	n := 0
	for _, e := range b.Entries {
		if e.Kind == kind {
			n++
		}
	}
	if n == 0 {
		return
	}
	o.mu.Lock()
	o.batches = append(o.batches, n)
	first := len(o.batches) == 1
	o.mu.Unlock()
	if first && o.onSkips != nil {
		o.onSkips()
	}
}

// cascadeSpecs is a root task, wide tasks that depend on it and as many that depend on
// those: 2*wide tasks to skip when the root fails.
func cascadeSpecs(wide int) []spec {
	specs := []spec{{ID: "root"}}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("a%d", i), Deps: []string{"root"}})
	}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("b%d", i), Deps: []string{fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", (i+1)%wide)}})
	}
	return specs
}

var failRoot = func(a orch.Attempt) orch.Outcome {
	if a.TaskID == "root" {
		return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
	}
	return orch.Outcome{State: lifecycle.TaskSucceeded}
}

// checkSkippedOnce reads run id's skip entries from orch.db: every task but the root skipped
// exactly once, each naming the root as the failed ancestor.
func checkSkippedOnce(t *testing.T, h *harness, id string, want int) {
	t.Helper()
	rows, err := h.db.SQL().Query(`SELECT subject, COUNT(*), MIN(entry) FROM audit_entries WHERE kind = ? AND subject LIKE ? GROUP BY subject`,
		entry.TaskSkipped, "run/"+id+"/task/%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var subject, body string
		var k int
		if err := rows.Scan(&subject, &k, &body); err != nil {
			t.Fatal(err)
		}
		if k != 1 {
			t.Errorf("%s skipped %d times", subject, k)
		}
		if !strings.Contains(body, `"ancestor":"root"`) || !strings.Contains(body, `"why":"failed"`) {
			t.Errorf("%s's skip entry names another cause: %s", subject, body)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%d tasks skipped, want %d", n, want)
	}
}

// TestCascade_SkipsInBoundedBatches fails the root of 6,000 dependents: they are skipped in
// batches of at most CascadeBatch, the run ends failed once the last of them is, and each is
// skipped once, naming the root.
func TestCascade_SkipsInBoundedBatches(t *testing.T) {
	wide := 3000
	if 2*wide <= 2*orch.CascadeBatch {
		t.Fatalf("the test skips %d tasks, which %d-task batches take in two", 2*wide, orch.CascadeBatch)
	}
	obs := &skipObserver{}
	h := startWith(t, "", newFakeExec(failRoot), orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "cascade-bounded", 1, cascadeSpecs(wide)...))
	r := h.wait(id)
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*wide || r.Counts[lifecycle.TaskFailed] != 1 {
		t.Fatalf("run %s with %v, want failed with %d skipped", r.State, r.Counts, 2*wide)
	}
	obs.mu.Lock()
	batches := obs.batches
	obs.mu.Unlock()
	checkBounded(t, "skips", batches, 2*wide)
	checkSkippedOnce(t, h, id, 2*wide)
}

// checkBounded checks the sizes of the batches that held what (skips, unskips): each at most
// CascadeBatch, want in all, in as few batches as that bound allows or more.
func checkBounded(t *testing.T, what string, batches []int, want int) {
	t.Helper()
	total := 0
	for _, n := range batches {
		if n > orch.CascadeBatch {
			t.Errorf("a batch held %d %s, more than %d", n, what, orch.CascadeBatch)
		}
		total += n
	}
	if least := (want + orch.CascadeBatch - 1) / orch.CascadeBatch; len(batches) < least || total != want {
		t.Errorf("%s in %d batches %v (%d in all), want %d in at least %d", what, len(batches), batches, total, want, least)
	}
}

// TestCascade_StopBetweenBatchesGoesOnAtOpen stops the engine after the first batch of a
// cascade committed, as a crash would cut it: the run's other dependents are still pending in
// orch.db. The engine opened next goes on with the cascade from them: the run ends failed,
// every dependent skipped once, naming the root, none twice.
func TestCascade_StopBetweenBatchesGoesOnAtOpen(t *testing.T) {
	wide := 3000
	obs := &skipObserver{}
	h := startWith(t, "", newFakeExec(failRoot), orch.Options{Observer: obs})
	obs.onSkips = h.cancel // called on the engine's goroutine, after the batch's commit
	id := h.submit(mkPlan(t, "cascade-stopped", 1, cascadeSpecs(wide)...))
	h.stopped()
	db := openDB(t, h.path)
	var skipped, pending int
	db.SQL().QueryRow(`SELECT COUNT(*) FROM tasks WHERE run_id = ? AND state = ?`, id, lifecycle.TaskSkipped).Scan(&skipped)
	db.SQL().QueryRow(`SELECT COUNT(*) FROM tasks WHERE run_id = ? AND state = ?`, id, lifecycle.TaskPending).Scan(&pending)
	db.Close()
	if skipped == 0 || skipped > orch.CascadeBatch || pending == 0 {
		t.Fatalf("after the stop: %d skipped, %d pending; want the first batch's skips and the rest pending", skipped, pending)
	}
	h = start(t, h.path, newFakeExec(failRoot))
	r := h.wait(id)
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*wide {
		t.Fatalf("run %s with %v after the engine opened again, want failed with %d skipped", r.State, r.Counts, 2*wide)
	}
	checkSkippedOnce(t, h, id, 2*wide)
}

// TestCascade_RetryWhileItGoesOn retries the failed root while its cascade is still going on
// in batches: the tasks it skipped become pending again and the ones it had still to skip are
// never skipped, so the root's second attempt succeeds and so does the whole run.
func TestCascade_RetryWhileItGoesOn(t *testing.T) {
	wide := 5000 // five batches: the retry comes while they go on
	var mu sync.Mutex
	rootAttempts := 0
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "root" {
			mu.Lock()
			defer mu.Unlock()
			if rootAttempts++; rootAttempts == 1 {
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
			}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	obs := &skipObserver{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	retried, ids := make(chan error, 1), make(chan string, 1)
	obs.onSkips = func() {
		// On the engine's goroutine: the retry is queued before the engine goes on, and
		// applied after the cascade's next batch.
		go func() {
			retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: <-ids, Task: "root", Actor: "me"})
		}()
		waitQueued(t, h.eng, 1)
	}
	id := h.submit(mkPlan(t, "cascade-retried", 50, cascadeSpecs(wide)...))
	ids <- id
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Fatalf("run %s with %v, want succeeded with every task", r.State, r.Counts)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.batches) == 0 {
		t.Fatal("no task was skipped: the retry did not meet a cascade")
	}
}

// holdRoot keeps the root running until the engine cancels it (decideOrCancel answers
// cancelled then) or the test ends; every other task succeeds.
func holdRoot(t *testing.T) func(orch.Attempt) orch.Outcome {
	end := make(chan struct{})
	t.Cleanup(func() { close(end) })
	return func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "root" {
			<-end
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	}
}

// checkCancelledOnce reads run id's task cancel entries from orch.db: want tasks cancelled,
// each once, and no task ever fired but the root.
func checkCancelledOnce(t *testing.T, h *harness, id string, want int) {
	t.Helper()
	var n, twice, fired int
	q := `SELECT COUNT(*), COUNT(*) - COUNT(DISTINCT subject) FROM audit_entries WHERE kind = ? AND subject LIKE ?`
	if err := h.db.SQL().QueryRow(q, entry.TaskCancelled, "run/"+id+"/task/%").Scan(&n, &twice); err != nil {
		t.Fatal(err)
	}
	if err := h.db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries WHERE kind = ? AND subject LIKE ?`, entry.TaskFired, "run/"+id+"/task/%").Scan(&fired); err != nil {
		t.Fatal(err)
	}
	if n != want || twice != 0 || fired != 1 {
		t.Errorf("%d cancel entries (%d repeated), %d tasks fired; want %d, none repeated, the root fired alone", n, twice, fired, want)
	}
}

// TestCascade_RunCancelInBoundedBatches cancels a run of 6,000 tasks waiting for a running
// root: the waiting tasks are cancelled in batches of at most CascadeBatch, none is fired
// meanwhile, and the run ends cancelled once the root's dispatch has answered and the last
// of them is cancelled.
func TestCascade_RunCancelInBoundedBatches(t *testing.T) {
	wide := 3000
	obs := &skipObserver{kind: entry.TaskCancelled}
	exec := newFakeExec(holdRoot(t))
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "cancel-bounded", 50, cascadeSpecs(wide)...))
	h.wait(id, lifecycle.RunRunning)
	if err := h.eng.Cancel(context.Background(), api.ActionRequest{Run: id, Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	r := h.wait(id)
	if r.State != lifecycle.RunCancelled || r.Counts[lifecycle.TaskCancelled] != 2*wide+1 {
		t.Fatalf("run %s with %v, want cancelled with every task", r.State, r.Counts)
	}
	obs.mu.Lock()
	batches := obs.batches
	obs.mu.Unlock()
	total := 0
	for _, n := range batches {
		if n > orch.CascadeBatch+1 { // the root's own end may share a batch
			t.Errorf("a batch cancelled %d tasks, more than %d", n, orch.CascadeBatch+1)
		}
		total += n
	}
	if len(batches) < 3 || total != 2*wide+1 {
		t.Errorf("cancels in %d batches %v (%d in all), want %d in at least 3", len(batches), batches, total, 2*wide+1)
	}
	checkCancelledOnce(t, h, id, 2*wide+1)
}

// TestCascade_StopInARunCancelGoesOnAtOpen stops the engine after the first batch of a
// run's cancel committed: the engine opened next cancels the rest, fires none of them, and the
// run ends cancelled with each task cancelled once.
func TestCascade_StopInARunCancelGoesOnAtOpen(t *testing.T) {
	wide := 3000
	obs := &skipObserver{kind: entry.TaskCancelled}
	h := startWith(t, "", newFakeExec(holdRoot(t)), orch.Options{Observer: obs})
	obs.onSkips = h.cancel
	id := h.submit(mkPlan(t, "cancel-stopped", 50, cascadeSpecs(wide)...))
	h.wait(id, lifecycle.RunRunning)
	if err := h.eng.Cancel(context.Background(), api.ActionRequest{Run: id, Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	h.stopped()
	db := openDB(t, h.path)
	var pending int
	db.SQL().QueryRow(`SELECT COUNT(*) FROM tasks WHERE run_id = ? AND state = ?`, id, lifecycle.TaskPending).Scan(&pending)
	db.Close()
	if pending == 0 {
		t.Fatal("after the stop no task was pending: the cancel was not cut")
	}
	// The root's dispatch was cancelled before the stop: re-attached, it answers so, as a
	// real dispatch whose cancel was recorded does.
	h = start(t, h.path, newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "root" {
			return orch.Outcome{State: lifecycle.TaskCancelled, Reason: "cancelled"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	}))
	r := h.wait(id)
	if r.State != lifecycle.RunCancelled || r.Counts[lifecycle.TaskCancelled] != 2*wide+1 {
		t.Fatalf("run %s with %v after the engine opened again, want cancelled with every task", r.State, r.Counts)
	}
	checkCancelledOnce(t, h, id, 2*wide+1)
}

// waitQueued waits, on the engine's goroutine (an Observer's callback), until n events are
// queued for the engine: a command sent from the callback is then applied by the engine's
// next batch, after the cascade's next part, rather than whenever its goroutine runs.
func waitQueued(tb testing.TB, e *orch.Engine, n int) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); orch.Queued(e) < n; runtime.Gosched() {
		if time.Now().After(deadline) {
			tb.Errorf("%d events queued after 10 s, want %d", orch.Queued(e), n)
			return
		}
	}
}

// stopped waits for h's engine to return from Run, which the test stopped on its own (an
// Observer cancelling it as a crash would), and closes its database: h.path is then free for
// the engine opened next.
func (h *harness) stopped() {
	h.tb.Helper()
	if err := <-h.done; err != nil {
		h.tb.Fatal(err)
	}
	h.cancel = nil
	h.db.Close()
}

// startFolding starts an engine on path, with exec and obs (nil: none), that folds the two
// oldest row log records in every commit past the fourth and never when idle.
func startFolding(t *testing.T, path string, exec orch.Executor, obs orch.Observer) *harness {
	t.Helper()
	db := openDB(t, path)
	eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, orch.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	orch.SetFoldBound(eng, 4)
	orch.SetFoldIdle(eng, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{tb: t, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- eng.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}
