package orch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// rootFails fails the root's first n attempts and succeeds every other task.
func rootFails(n int) func(orch.Attempt) orch.Outcome {
	return func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "root" && a.Number <= n {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	}
}

// reversedSpecs is cascadeSpecs(wide) with the second layer listed before the first: the
// plan's order puts each b before the a tasks it waits for, as a fan-out's items come after
// the task that waits for them.
func reversedSpecs(wide int) []spec {
	s := cascadeSpecs(wide)
	return append(append([]spec{s[0]}, s[1+wide:]...), s[1:1+wide]...)
}

// unskipBatches counts the orch.task.unskipped entries of each committed batch that holds
// some and calls onBatch (when set) with the batch's number, 1 first, on the engine's
// goroutine after its commit.
type unskipBatches struct {
	commitCount
	mu      sync.Mutex
	batches []int
	onBatch func(k int)
}

func (o *unskipBatches) Committed(b orch.Batch) {
	n := 0
	for _, e := range b.Entries {
		if e.Kind == entry.TaskUnskipped {
			n++
		}
	}
	if n == 0 {
		return
	}
	o.mu.Lock()
	o.batches = append(o.batches, n)
	k := len(o.batches)
	o.mu.Unlock()
	if o.onBatch != nil {
		o.onBatch(k)
	}
}

func (o *unskipBatches) counts() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.batches...)
}

// retryRoot retries run id's root as a caller does.
func retryRoot(t *testing.T, h *harness, id string) {
	t.Helper()
	if err := h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "root", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
}

// unskipsWaiting is how many unskips orch.db notes as waiting for run id.
func unskipsWaiting(t *testing.T, h *harness, id string) int {
	t.Helper()
	var n int
	if err := h.db.SQL().QueryRow(`SELECT COUNT(*) FROM run_unskips WHERE run_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkUnskippedOnce checks that every one of want tasks of run id was unskipped once,
// naming the root, and that no unskip is left waiting.
func checkUnskippedOnce(t *testing.T, h *harness, id string, want int) {
	t.Helper()
	counts := entryCounts(t, h, id, entry.TaskUnskipped)
	if len(counts) != want {
		t.Errorf("%d tasks unskipped, want %d", len(counts), want)
	}
	for task, k := range counts {
		if k != 1 {
			t.Errorf("%s unskipped %d times", task, k)
		}
	}
	rows, err := h.db.SQL().Query(`SELECT subject, entry FROM audit_entries WHERE kind = ? AND subject LIKE ?`,
		entry.TaskUnskipped, "run/"+id+"/task/%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var subject, body string
		if err := rows.Scan(&subject, &body); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body, `"because":"root"`) {
			t.Fatalf("%s's unskip entry names another task than root: %s", subject, body)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d unskips noted as waiting after the run ended", n)
	}
}

// TestUnskip_InBoundedBatches retries the failed root of 6,000 skipped dependents: they are
// taken back in batches of at most CascadeBatch, each once and naming the root, the
// second layer after the first though the plan lists it first, and the whole run succeeds.
func TestUnskip_InBoundedBatches(t *testing.T) {
	wide := 3000
	obs := &unskipBatches{}
	h := startWith(t, "", newFakeExec(rootFails(1)), orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "unskip-bounded", 50, reversedSpecs(wide)...))
	if r := h.wait(id); r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*wide {
		t.Fatalf("run %s with %v, want failed with %d skipped", r.State, r.Counts, 2*wide)
	}
	retryRoot(t, h, id)
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Fatalf("run %s with %v after the retry, want succeeded with every task", r.State, r.Counts)
	}
	checkBounded(t, "unskips", obs.counts(), 2*wide)
	checkUnskippedOnce(t, h, id, 2*wide)
}

// TestUnskip_StopBetweenBatchesGoesOnAtOpen stops the engine after the first batch of an
// unskip committed, as a crash would cut it. orch.db then notes the unskip, and no pending
// task waits on a skipped one (load would read that as a skip cascade cut short). The engine
// opened next goes on from the note: each task is unskipped once, naming the root, and the
// run succeeds.
func TestUnskip_StopBetweenBatchesGoesOnAtOpen(t *testing.T) {
	wide := 3000
	obs := &unskipBatches{}
	h := startWith(t, "", newFakeExec(rootFails(1)), orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "unskip-stopped", 50, reversedSpecs(wide)...))
	h.wait(id)
	obs.onBatch = func(int) { h.cancel() }
	retryRoot(t, h, id)
	h.stopped()

	db := openDB(t, h.path)
	states := map[string]string{}
	rows, err := db.SQL().Query(`SELECT id, state FROM tasks WHERE run_id = ?`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var task, state string
		if err := rows.Scan(&task, &state); err != nil {
			t.Fatal(err)
		}
		states[task] = state
	}
	rows.Close()
	var noted int
	db.SQL().QueryRow(`SELECT COUNT(*) FROM run_unskips WHERE run_id = ? AND idx = 0`, id).Scan(&noted)
	db.Close()
	skipped, pending := 0, 0
	for task, s := range states {
		switch s {
		case lifecycle.TaskSkipped:
			skipped++
		case lifecycle.TaskPending:
			pending++
			if !strings.HasPrefix(task, "b") {
				continue
			}
			var i int
			fmt.Sscanf(task, "b%d", &i)
			for _, dep := range []string{fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", (i+1)%wide)} {
				if states[dep] == lifecycle.TaskSkipped {
					t.Errorf("after the stop %s is pending and waits on %s, which is skipped", task, dep)
				}
			}
		}
	}
	if skipped == 0 || pending == 0 || noted != 1 {
		t.Fatalf("after the stop: %d skipped, %d pending, %d notes of the root's unskip; want some of each and one note", skipped, pending, noted)
	}

	h = start(t, h.path, newFakeExec(rootFails(1)))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Fatalf("run %s with %v after the engine opened again, want succeeded with every task", r.State, r.Counts)
	}
	checkUnskippedOnce(t, h, id, 2*wide)
}

// TestUnskip_CancelWhileItGoesOn cancels the run while a retry's unskip goes on: the unskip
// stops, nothing but the root fires, every task ends cancelled or skipped, and no unskip is
// left noted.
func TestUnskip_CancelWhileItGoesOn(t *testing.T) {
	wide := 3000
	obs := &unskipBatches{}
	// The root's second attempt runs until the engine cancels it.
	hold := holdRoot(t)
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "root" && a.Number == 1 {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
		}
		return hold(a)
	})
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "unskip-cancelled", 50, cascadeSpecs(wide)...))
	h.wait(id)
	cancelled := make(chan error, 1)
	obs.onBatch = func(k int) {
		if k == 1 {
			go func() { cancelled <- h.eng.Cancel(context.Background(), api.ActionRequest{Run: id, Actor: "me"}) }()
			waitQueued(t, h.eng, 1)
		}
	}
	retryRoot(t, h, id)
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	r := h.wait(id)
	if r.State != lifecycle.RunCancelled || r.Counts[lifecycle.TaskCancelled]+r.Counts[lifecycle.TaskSkipped] != 2*wide+1 {
		t.Fatalf("run %s with %v, want cancelled with every task cancelled or skipped", r.State, r.Counts)
	}
	// The cancel is applied in the second batch, after that batch's part of the unskip.
	if got := obs.counts(); len(got) != 2 || r.Counts[lifecycle.TaskSkipped] == 0 {
		t.Errorf("unskips in batches %v, %d tasks still skipped; want two batches, the rest left skipped", got, r.Counts[lifecycle.TaskSkipped])
	}
	if k := entryCounts(t, h, id, entry.TaskFired); len(k) != 1 || k["root"] != 2 {
		t.Errorf("fired entries %v, want root's 2 alone", k)
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d unskips noted as waiting after the run was cancelled", n)
	}
}

// TestUnskip_RootFailsAndIsRetriedAgainWhileItGoesOn fails the retried root again while its
// unskip goes on, then retries it a third time while the second skip cascade goes on: the
// second unskip goes on beside the first, and the run succeeds with every task, each skipped as
// often as unskipped, nothing fired twice but the root, no unskip left noted.
func TestUnskip_RootFailsAndIsRetriedAgainWhileItGoesOn(t *testing.T) {
	wide := 5000 // five batches of unskips: the root's second end comes in the third
	obs := &unskipBatches{}
	// The root's second attempt ends when the second batch of unskips has committed.
	release := make(chan struct{})
	fails := rootFails(2)
	h := startWith(t, "", newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "root" && a.Number == 2 {
			<-release
		}
		return fails(a)
	}), orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "unskip-refailed", 50, cascadeSpecs(wide)...))
	h.wait(id)
	retried := make(chan error, 1)
	obs.onBatch = func(k int) {
		switch k {
		case 2:
			// Its failure is queued before the third batch, which applies it after its
			// part of the unskip.
			close(release)
			waitQueued(t, h.eng, 1)
		case 3:
			go func() {
				retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "root", Actor: "me"})
			}()
			waitQueued(t, h.eng, 1)
		}
	}
	retryRoot(t, h, id)
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Fatalf("run %s with %v, want succeeded with every task", r.State, r.Counts)
	}
	skips, unskips := entryCounts(t, h, id, entry.TaskSkipped), entryCounts(t, h, id, entry.TaskUnskipped)
	twice := 0
	for task, k := range skips {
		if unskips[task] != k {
			t.Errorf("%s skipped %d times, unskipped %d", task, k, unskips[task])
		}
		if k == 2 {
			twice++
		}
	}
	if len(skips) != 2*wide || twice == 0 || twice == 2*wide {
		t.Errorf("%d tasks skipped, %d of them twice; want %d, some twice (the root's second failure met the unskip) and some once",
			len(skips), twice, 2*wide)
	}
	fired := entryCounts(t, h, id, entry.TaskFired)
	for task, k := range fired {
		if want := map[bool]int{true: 3, false: 1}[task == "root"]; k != want {
			t.Errorf("%s fired %d times, want %d", task, k, want)
		}
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d unskips noted as waiting after the run ended", n)
	}
}

const unskipKillEnv = "AGORA_ORCH_UNSKIP_KILL_CHILD"

// TestUnskip_Kill9BetweenBatches kills a process with SIGKILL right after the first batch of
// a retry's unskip committed: a child process runs reversedSpecs(3000), fails the root,
// retries it, and kills itself from the Observer of the first batch that holds unskips.
// orch.db then notes the unskip; an engine opened on it goes on from the note, and the run
// succeeds with each task unskipped once, naming the root.
func TestUnskip_Kill9BetweenBatches(t *testing.T) {
	const wide = 3000
	if path := os.Getenv(unskipKillEnv); path != "" {
		unskipKillChild(t, path, wide)
		return
	}
	path := filepath.Join(t.TempDir(), "orch.db")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestUnskip_Kill9BetweenBatches$", "-test.count", "1")
	cmd.Env = append(os.Environ(), unskipKillEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed: %v\n%s", err, out)
	}
	db := openDB(t, path)
	var id string
	var notes int
	if err := db.SQL().QueryRow(`SELECT id FROM runs`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM run_unskips WHERE run_id = ? AND idx = 0`, id).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if notes != 1 {
		t.Fatalf("%d notes of the root's unskip after the kill, want 1", notes)
	}
	// The root's second attempt was fired before the kill: re-attached, it succeeds.
	h := start(t, path, newFakeExec(rootFails(1)))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Fatalf("run %s with %v after the engine opened again, want succeeded with every task", r.State, r.Counts)
	}
	checkUnskippedOnce(t, h, id, 2*wide)
}

// unskipKillChild is TestUnskip_Kill9BetweenBatches's child process.
func unskipKillChild(t *testing.T, path string, wide int) {
	obs := &unskipBatches{onBatch: func(int) {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}}
	h := startWith(t, path, newFakeExec(rootFails(1)), orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "unskip-killed", 50, reversedSpecs(wide)...))
	h.wait(id)
	go h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "root", Actor: "me"})
	agoratest.AwaitOwnKill(t, "the first batch of unskips")
}
