package orch_test

// Attacks on the bounded unskip of `orch retry` (unskip.go): the unskip goes on over several
// batches, is noted in run_unskips while it waits, and is resumed from its root at load.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// unskipObs calls onBatch (on the engine's goroutine) with every committed batch and the
// number of batches so far that held an orch.task.unskipped entry (this one included).
type unskipObs struct {
	commitCount
	mu      sync.Mutex
	unskips int
	onBatch func(b orch.Batch, k int)
}

func (o *unskipObs) Committed(b orch.Batch) {
	o.mu.Lock()
	if countKind(b, entry.TaskUnskipped) > 0 {
		o.unskips++
	}
	k, f := o.unskips, o.onBatch
	o.mu.Unlock()
	if f != nil {
		f(b, k)
	}
}

func (o *unskipObs) set(f func(b orch.Batch, k int)) {
	o.mu.Lock()
	o.onBatch = f
	o.mu.Unlock()
}

// rootFailsThenHeld is an executor whose root fails its first attempt and runs its later
// ones until the test ends; every other task succeeds.
func rootFailsThenHeld() *rtExec {
	var mu sync.Mutex
	roots := 0
	return newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID != "root" {
			return rtOK, true
		}
		mu.Lock()
		defer mu.Unlock()
		if roots++; roots == 1 {
			return rtFail, true
		}
		return orch.Outcome{}, false
	})
}

// checkEndsNoNote checks that run id ended ends times in all (one orch.run.ended entry each)
// and that orch.db notes no unskip of it as waiting.
func checkEndsNoNote(t *testing.T, h *harness, id string, ends int) {
	t.Helper()
	if k := runEntries(t, h, id, entry.RunEnded); k != ends {
		t.Errorf("%d orch.run.ended entries, want %d", k, ends)
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d unskips noted as waiting after the run ended", n)
	}
}

// retryTask retries task of run id as a caller does.
func retryTask(t *testing.T, h *harness, id, task string) {
	t.Helper()
	if err := h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: task, Actor: "me"}); err != nil {
		t.Fatalf("retry %s: %v", task, err)
	}
}

// fanOutFillers is a plan whose producer split has n dependents listed before the fan-out
// each (so a retry of split takes them back before each), then reduce, which reads each's
// items.
func fanOutFillers(t *testing.T, name string, n int) *plan.Plan {
	t.Helper()
	tasks := []map[string]any{{"id": "split", "subagent": "splitter"}}
	for i := range n {
		tasks = append(tasks, map[string]any{"id": fmt.Sprintf("f%d", i), "subagent": "worker", "depends_on": []string{"split"}})
	}
	tasks = append(tasks,
		map[string]any{"id": "each", "fan_out": map[string]any{"from": "split", "select": "output:items.json",
			"template": map[string]any{"subagent": "worker", "input": map[string]any{"goal": "port"}}}},
		map[string]any{"id": "reduce", "subagent": "reducer", "needs": map[string]any{"parts": map[string]any{"from": "each", "select": "outputs"}}})
	doc, err := json.Marshal(map[string]any{"version": 1, "name": name, "concurrency": 64, "tasks": tasks})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse(name+".json", doc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRedTeam47Unskip_FanOutProducerSucceedsBeforeItsFanOutIsUnskipped: split, the producer
// of fan-out each, fails and skips its 7,000 other dependents, each and reduce. Its retry
// takes them back over four batches, each last; split's second attempt succeeds (with a list
// of two items) in the third, while each is still skipped. The fan-out must still add its
// items: the run succeeds with each[alpha] and each[beta] run, and reduce receives both.
func TestRedTeam47Unskip_FanOutProducerSucceedsBeforeItsFanOutIsUnskipped(t *testing.T) {
	const n = 7000
	list := items(t, `[{"id": "alpha"}, {"id": "beta"}]`)
	var mu sync.Mutex
	splits := 0
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID != "split" {
			return rtOK, true
		}
		mu.Lock()
		defer mu.Unlock()
		splits++
		if splits == 1 {
			return rtFail, true
		}
		return orch.Outcome{}, false // the retried attempt is held until the test answers it
	})
	obs := &unskipObs{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(fanOutFillers(t, "rt47u-fanout", n))
	if r := h.wait(id); r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != n+2 {
		t.Fatalf("run %s with %v, want failed with %d skipped", r.State, r.Counts, n+2)
	}
	answered := false
	obs.set(func(b orch.Batch, k int) {
		if k == 2 && !answered && countKind(b, entry.TaskUnskipped) > 0 {
			// split fired after the first batch: its success is applied in the third,
			// after that batch's part of the unskip and before each's.
			ok := orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": list}}
			answered = exec.finishNow(id, "split", ok)
		}
	})
	retryTask(t, h, id, "split")
	r := waitEnded(t, h, id, 20*time.Second)
	obs.set(nil)
	if !answered {
		t.Fatal("split's retried attempt was not held after the second batch of unskips")
	}
	st := taskStates(r)
	if r.State != lifecycle.RunSucceeded || st["each[alpha]"] != lifecycle.TaskSucceeded || st["each[beta]"] != lifecycle.TaskSucceeded {
		t.Errorf("run %s with %v: each %s, each[alpha] %q, each[beta] %q; want succeeded with both items run",
			r.State, r.Counts, st["each"], st["each[alpha]"], st["each[beta]"])
	}
	exec.mu.Lock()
	var reduce []orch.Attempt
	for _, a := range exec.started {
		if a.TaskID == "reduce" {
			reduce = append(reduce, a)
		}
	}
	exec.mu.Unlock()
	if len(reduce) != 1 || len(reduce[0].Inputs) != 2 {
		ins := -1
		if len(reduce) > 0 {
			ins = len(reduce[0].Inputs)
		}
		t.Errorf("reduce fired %d times, first with %d inputs; want once with each's two items", len(reduce), ins)
	}
	if k := entryCounts(t, h, id, entry.TaskUnskipped); len(k) != n+2 {
		t.Errorf("%d tasks unskipped, want %d", len(k), n+2)
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d unskips noted after the run ended", n)
	}
}

// TestRedTeam47Unskip_FanOutTemplateDepFailsWhileProducerSucceeds: fan-out each waits for
// its producer split and, through its template, for q. q fails (each and reduce are skipped),
// then split succeeds with a list of two items while each is skipped; q is retried and
// succeeds. each must not end succeeded without the items split listed: it runs them (or
// fails), and reduce never receives an empty fan-out as if it had no items.
func TestRedTeam47Unskip_FanOutTemplateDepFailsWhileProducerSucceeds(t *testing.T) {
	src := `version: 1
name: rt47u-fan-dep
concurrency: 8
tasks:
  - {id: split, subagent: splitter}
  - {id: q, subagent: worker}
  - id: each
    fan_out:
      from: split
      select: "output:items.json"
      template: {subagent: worker, depends_on: [q], input: {goal: port}}
  - id: reduce
    subagent: reducer
    needs: {parts: {from: each, select: outputs}}
`
	list := items(t, `[{"id": "alpha"}, {"id": "beta"}]`)
	var mu sync.Mutex
	qs := 0
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		switch a.TaskID {
		case "split":
			return orch.Outcome{}, false
		case "q":
			mu.Lock()
			defer mu.Unlock()
			if qs++; qs == 1 {
				return rtFail, true
			}
		}
		return rtOK, true
	})
	h := start(t, "", exec)
	id := h.submit(parsePlan(t, src))
	exec.waitHeld(t, id, "split")
	h.waitTask(id, "each", lifecycle.TaskSkipped)
	exec.finish(t, id, "split", orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": list}})
	r := waitEnded(t, h, id, 10*time.Second)
	if r.State != lifecycle.RunFailed {
		t.Fatalf("run %s with %v, want failed (q failed)", r.State, taskStates(r))
	}
	retryTask(t, h, id, "q")
	r = waitEnded(t, h, id, 10*time.Second)
	st := taskStates(r)
	if st["each"] == lifecycle.TaskSucceeded && st["each[alpha]"] != lifecycle.TaskSucceeded {
		t.Errorf("each %s though its items never ran (each[alpha] %q, each[beta] %q): run %s with %v",
			st["each"], st["each[alpha]"], st["each[beta]"], r.State, r.Counts)
	}
	for _, a := range exec.startedList() {
		if a.TaskID == "reduce" && len(a.Inputs) != 2 {
			t.Errorf("reduce fired with %d inputs, split listed 2 items", len(a.Inputs))
		}
	}
}

func (x *rtExec) startedList() []orch.Attempt {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]orch.Attempt(nil), x.started...)
}

// entrySeqs reads the seq of every run id entry of kind, by task.
func entrySeqs(t *testing.T, h *harness, id, kind string) map[string][]int64 {
	t.Helper()
	rows, err := h.db.SQL().Query(`SELECT subject, seq FROM audit_entries WHERE kind = ? AND subject LIKE ? ORDER BY seq`,
		kind, "run/"+id+"/task/%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]int64{}
	for rows.Next() {
		var s string
		var seq int64
		if err := rows.Scan(&s, &seq); err != nil {
			t.Fatal(err)
		}
		task := strings.TrimPrefix(s, "run/"+id+"/task/")
		out[task] = append(out[task], seq)
	}
	return out
}

// unskipCauses reads the task each unskip entry of run id names (because), by task, in order.
func unskipCauses(t *testing.T, h *harness, id string) map[string][]string {
	t.Helper()
	rows, err := h.db.SQL().Query(`SELECT subject, entry FROM audit_entries WHERE kind = ? AND subject LIKE ? ORDER BY seq`,
		entry.TaskUnskipped, "run/"+id+"/task/%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var s, body string
		if err := rows.Scan(&s, &body); err != nil {
			t.Fatal(err)
		}
		task := strings.TrimPrefix(s, "run/"+id+"/task/")
		i := strings.Index(body, `"because":"`)
		if i < 0 {
			t.Fatalf("%s's unskip entry names no cause: %s", s, body)
		}
		rest := body[i+len(`"because":"`):]
		out[task] = append(out[task], rest[:strings.IndexByte(rest, '"')])
	}
	return out
}

// checkSkipsUnskips checks that each task of run id alternates skip and unskip entries,
// starting with a skip: never unskipped twice without a skip between.
func checkSkipsUnskips(t *testing.T, h *harness, id string) {
	t.Helper()
	skips, unskips := entrySeqs(t, h, id, entry.TaskSkipped), entrySeqs(t, h, id, entry.TaskUnskipped)
	bad := 0
	for task, us := range unskips {
		ss := skips[task]
		ok := len(ss) == len(us) || len(ss) == len(us)+1
		for i := 0; ok && i < len(us); i++ {
			ok = ss[i] < us[i] && (i+1 >= len(ss) || us[i] < ss[i+1])
		}
		if !ok {
			if bad++; bad < 5 {
				t.Errorf("%s: skip entries at %v, unskip entries at %v: not one unskip after each skip", task, ss, us)
			}
		}
	}
}

// notesAt counts the run_unskips rows of run id at path, the engine stopped.
func notesAt(t *testing.T, path, id string) int {
	t.Helper()
	db := openDB(t, path)
	defer db.Close()
	var n int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM run_unskips WHERE run_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRedTeam47Unskip_RefailStopRetryAgainWithFolds folds in every commit. root fails and
// its 8,000 dependents are skipped; its retry's unskip goes on when root fails again (in the
// third batch, after that batch's part of the unskip); the engine stops right after that
// batch, with the unskip noted and the second skip cascade waiting. The engine opened next
// ends both, and the run ends failed; root retried once more, the run succeeds. Each task
// alternates skips and unskips, every unskip names root, every dependent fires once and only
// after root succeeded, the run ends three times (failed, failed, succeeded), and no note is
// left.
func TestRedTeam47Unskip_RefailStopRetryAgainWithFolds(t *testing.T) {
	const wide = 4000
	path := filepath.Join(t.TempDir(), "orch.db")
	exec := rootFailsThenHeld()
	obs := &unskipObs{}
	h := startFolding(t, path, exec, obs)
	id := h.submit(mkPlan(t, "rt47u-refail-stop", 50, cascadeSpecs(wide)...))
	h.wait(id)
	failedAgain, stopped := false, false
	obs.set(func(b orch.Batch, k int) {
		switch {
		case k == 2 && !failedAgain:
			failedAgain = exec.finishNow(id, "root", rtFail)
		case failedAgain && !stopped && countKind(b, entry.TaskFailed) > 0:
			stopped = true
			h.cancel()
		}
	})
	retryRoot(t, h, id)
	h.stopped()
	if !stopped {
		t.Fatal("root's second failure was never committed")
	}
	if n := notesAt(t, path, id); n != 1 {
		t.Fatalf("%d notes after the stop, want the root's unskip noted", n)
	}

	h = startFolding(t, path, newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true }), nil)
	if r := waitEnded(t, h, id, 20*time.Second); r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*wide {
		t.Fatalf("run %s with %v after the engine opened again, want failed with %d skipped", r.State, r.Counts, 2*wide)
	}
	retryRoot(t, h, id)
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Fatalf("run %s with %v, want succeeded with every task", r.State, r.Counts)
	}
	checkSkipsUnskips(t, h, id)
	for task, causes := range unskipCauses(t, h, id) {
		for _, c := range causes {
			if c != "root" {
				t.Fatalf("%s unskipped because of %s", task, c)
			}
		}
	}
	fired, succ := entrySeqs(t, h, id, entry.TaskFired), entrySeqs(t, h, id, entry.TaskSucceeded)
	rootOK := succ["root"]
	if len(rootOK) != 1 || len(fired["root"]) != 3 {
		t.Fatalf("root fired %d times, succeeded %d; want 3 and 1", len(fired["root"]), len(rootOK))
	}
	bad := 0
	for task, fs := range fired {
		if task == "root" {
			continue
		}
		if len(fs) != 1 || fs[0] < rootOK[0] {
			if bad++; bad < 5 {
				t.Errorf("%s fired at %v, root succeeded at %d: want once, after it", task, fs, rootOK[0])
			}
		}
	}
	if k := runEntries(t, h, id, entry.RunEnded); k != 3 {
		t.Errorf("%d orch.run.ended entries, want 3 (failed, failed again, succeeded)", k)
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d unskips noted after the run ended", n)
	}
	h.stop()
	db := openDB(t, path)
	checkTables(t, db.SQL(), id)
	db.Close()
}

// TestRedTeam47Unskip_SecondDeadDependencyStop: b_i waits for a_i (under root) and for s.
// root fails (10,000 skipped); its retry's unskip takes back every a_i, then the first b_i,
// which wait for s, still running; s then fails (its cascade cut at once, the batch spent),
// and the engine stops. The engine opened next skips what s holds: no b_i ever fires, each
// ends skipped (naming s when it was taken back); the a_i succeed; the run ends failed once,
// and no note is left.
func TestRedTeam47Unskip_SecondDeadDependencyStop(t *testing.T) {
	const wide = 5000
	specs := []spec{{ID: "root"}, {ID: "s"}}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("a%d", i), Deps: []string{"root"}})
	}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("b%d", i), Deps: []string{fmt.Sprintf("a%d", i), "s"}})
	}
	path := filepath.Join(t.TempDir(), "orch.db")
	var mu sync.Mutex
	roots := 0
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		switch a.TaskID {
		case "s":
			return orch.Outcome{}, false
		case "root":
			mu.Lock()
			defer mu.Unlock()
			if roots++; roots == 1 {
				return rtFail, true
			}
			return orch.Outcome{}, false
		}
		return rtOK, true
	})
	obs := &unskipObs{}
	h := startWith(t, path, exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47u-second-dead", 50, specs...))
	exec.waitHeld(t, id, "s")
	h.waitTask(id, "b0", lifecycle.TaskSkipped)
	sFailed, stopped := false, false
	obs.set(func(b orch.Batch, k int) {
		switch {
		case k == 3 && !sFailed:
			// The third batch took back the last a_i and the first b_i.
			sFailed = exec.finishNow(id, "s", rtFail)
		case sFailed && !stopped && countKind(b, entry.TaskFailed) > 0:
			stopped = true
			h.cancel()
		}
	})
	retryRoot(t, h, id)
	h.stopped()
	if !stopped {
		t.Fatal("s's failure was never committed")
	}
	h = start(t, path, newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true }))
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != wide || r.Counts[lifecycle.TaskSucceeded] != wide+1 {
		t.Errorf("run %s with %v, want failed: s failed, root and the a_i succeeded, the b_i skipped", r.State, r.Counts)
	}
	fired := entryCounts(t, h, id, entry.TaskFired)
	names, _ := skipAncestors(t, h, id)
	unskipped := entryCounts(t, h, id, entry.TaskUnskipped)
	bad, took := 0, 0
	for i := range wide {
		b := fmt.Sprintf("b%d", i)
		if unskipped[b] > 0 {
			took++
		}
		if fired[b] != 0 || (unskipped[b] > 0 && names[b] != "s") {
			if bad++; bad < 5 {
				t.Errorf("%s fired %d times, unskipped %d, last skipped naming %q; want never fired, skipped naming s once taken back",
					b, fired[b], unskipped[b], names[b])
			}
		}
	}
	if took == 0 {
		t.Error("no b_i was taken back before s failed: the attack missed")
	}
	checkSkipsUnskips(t, h, id)
	if k := runEntries(t, h, id, entry.RunEnded); k != 1 {
		t.Errorf("%d orch.run.ended entries, want 1 (s ran until the end)", k)
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d unskips noted after the run ended", n)
	}
}

// TestRedTeam47Unskip_TwoRootsBothNotedStop: ra and rb each have 4,500 dependents and 300
// tasks wait for one of each. Both fail; ra is retried, and rb while ra's unskip goes on, so
// both unskips wait, noted, when the engine stops. The engine opened next goes on with both:
// every task is unskipped once (the shared ones by whichever root came to them with the
// other alive), each naming a root it is under, and the run succeeds with no note left.
func TestRedTeam47Unskip_TwoRootsBothNotedStop(t *testing.T) {
	const wide, both = 4500, 300
	specs := twoRootSpecs(wide, both)
	path := filepath.Join(t.TempDir(), "orch.db")
	var mu sync.Mutex
	starts := map[string]int{}
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID == "ra" || a.TaskID == "rb" {
			mu.Lock()
			defer mu.Unlock()
			if starts[a.TaskID]++; starts[a.TaskID] == 1 {
				return rtFail, true
			}
			return orch.Outcome{}, false
		}
		return rtOK, true
	})
	obs := &unskipObs{}
	h := startWith(t, path, exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47u-two-roots", 50, specs...))
	if r := h.wait(id); r.State != lifecycle.RunFailed {
		t.Fatalf("run %s", r.State)
	}
	retried := make(chan error, 1)
	obs.set(func(b orch.Batch, k int) {
		switch {
		case k == 1 && countKind(b, entry.TaskRetried) > 0:
			go func() {
				retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "rb", Actor: "me"})
			}()
			waitQueued(t, h.eng, 1)
		case k == 2:
			h.cancel()
		}
	})
	if err := h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "ra", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	h.stopped()
	if n := notesAt(t, path, id); n != 2 {
		t.Fatalf("%d notes after the stop, want both unskips noted", n)
	}
	h = start(t, path, newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true }))
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != len(specs) {
		t.Errorf("run %s with %v, want succeeded with every task", r.State, r.Counts)
	}
	causes := unskipCauses(t, h, id)
	bad := 0
	for _, s := range specs {
		if s.ID == "ra" || s.ID == "rb" {
			continue
		}
		c := causes[s.ID]
		ok := len(c) == 1
		if ok && !strings.HasPrefix(s.ID, "both-") {
			ok = strings.HasPrefix(s.ID, c[0]+"-")
		} else if ok {
			ok = c[0] == "ra" || c[0] == "rb"
		}
		if !ok {
			if bad++; bad < 5 {
				t.Errorf("%s unskipped naming %v, want once naming a root it is under", s.ID, c)
			}
		}
	}
	if k := entryCounts(t, h, id, entry.TaskFired); len(k) != len(specs) {
		t.Errorf("%d tasks fired, want all %d", len(k), len(specs))
	}
	checkEndsNoNote(t, h, id, 2)
}

// TestRedTeam47Unskip_RunCancelStop: the run is cancelled while a retry's unskip goes on
// (the cancel applied after the second batch's part of the unskip, so it waits at once), and
// the engine stops after that batch. The engine opened next goes on with the cancel, drops
// the unskip and its note: nothing but root fires, every task ends cancelled or skipped, the
// run ends cancelled (twice in all: failed first), and no note is left.
func TestRedTeam47Unskip_RunCancelStop(t *testing.T) {
	const wide = 3000
	path := filepath.Join(t.TempDir(), "orch.db")
	exec := rootFailsThenHeld()
	obs := &unskipObs{}
	h := startWith(t, path, exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47u-cancel-stop", 50, cascadeSpecs(wide)...))
	h.wait(id)
	cancelled := make(chan error, 1)
	stopped := false
	obs.set(func(b orch.Batch, k int) {
		switch {
		case k == 1 && countKind(b, entry.TaskRetried) > 0:
			go func() { cancelled <- h.eng.Cancel(context.Background(), api.ActionRequest{Run: id, Actor: "me"}) }()
			waitQueued(t, h.eng, 1)
		case !stopped && countKind(b, entry.RunCancelRequested) > 0:
			stopped = true
			h.cancel()
		}
	})
	retryRoot(t, h, id)
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	h.stopped()
	if !stopped {
		t.Fatal("the cancel was never committed")
	}
	x := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return orch.Outcome{}, false })
	x.cancelAnswers = true
	h = start(t, path, x)
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunCancelled || r.Counts[lifecycle.TaskCancelled]+r.Counts[lifecycle.TaskSkipped] != 2*wide+1 {
		t.Errorf("run %s with %v, want cancelled with every task cancelled or skipped", r.State, r.Counts)
	}
	if k := entryCounts(t, h, id, entry.TaskFired); len(k) != 1 || k["root"] != 2 {
		t.Errorf("fired entries %v, want root's 2 alone", k)
	}
	for task, k := range entryCounts(t, h, id, entry.TaskCancelled) {
		if k != 1 {
			t.Errorf("%s cancelled %d times", task, k)
		}
	}
	checkSkipsUnskips(t, h, id)
	checkEndsNoNote(t, h, id, 2)
}

// TestRedTeam47Unskip_ReadersDuringUnskip folds in every commit and reads the run after each
// batch of a retry's unskip (root's retried attempt held): Status and the Reader's counts add
// up to the run's tasks, the run is running, and the skipped count is what the unskip has
// still to take back.
func TestRedTeam47Unskip_ReadersDuringUnskip(t *testing.T) {
	const wide = 3000
	path := filepath.Join(t.TempDir(), "orch.db")
	exec := rootFailsThenHeld()
	obs := &unskipObs{}
	h := startFolding(t, path, exec, obs)
	id := h.submit(mkPlan(t, "rt47u-readers", 50, cascadeSpecs(wide)...))
	h.wait(id)
	ro, err := store.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rd := orch.NewReader(ro.SQL())
	var problems []string
	taken, reads := 0, 0
	obs.set(func(b orch.Batch, k int) {
		n := countKind(b, entry.TaskUnskipped)
		if n == 0 {
			return
		}
		taken += n
		reads++
		ctx := context.Background()
		counts, total, err := rd.Counts(ctx, id)
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		sum := 0
		for _, c := range counts {
			sum += c
		}
		if sum != 2*wide+1 || total != 2*wide+1 || counts[lifecycle.TaskSkipped] != 2*wide-taken {
			problems = append(problems, fmt.Sprintf("batch %d: Reader counts %v (total %d) after %d unskips", k, counts, total, taken))
		}
		st, err := h.eng.Status(ctx, id)
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		sum = 0
		for _, c := range st.Counts {
			sum += c
		}
		if st.State != lifecycle.RunRunning || sum != 2*wide+1 || st.Counts[lifecycle.TaskSkipped] != 2*wide-taken {
			problems = append(problems, fmt.Sprintf("batch %d: Status %s with %v after %d unskips", k, st.State, st.Counts, taken))
		}
	})
	retryRoot(t, h, id)
	exec.waitHeld(t, id, "root")
	// Every unskip is committed once the run no longer has a skipped task.
	agoratest.WaitFor(t, 10*time.Second, "the unskip to end", func() bool {
		r, err := h.eng.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Counts[lifecycle.TaskSkipped] == 0
	})
	barrier(t, h)
	obs.set(nil)
	for _, p := range problems {
		t.Error(p)
	}
	if reads < 2 {
		t.Errorf("%d batches of unskips, want at least 2", reads)
	}
	exec.finish(t, id, "root", rtOK)
	if r := waitEnded(t, h, id, 20*time.Second); r.State != lifecycle.RunSucceeded {
		t.Errorf("run %s with %v, want succeeded", r.State, r.Counts)
	}
}

// failedRun runs a plan whose root fails (its two dependents skipped) beside task ok, which
// succeeds, and stops the engine: path then holds the failed run, whose id it returns.
func failedRun(t *testing.T, path string) string {
	t.Helper()
	h := start(t, path, newFakeExec(failRoot))
	id := h.submit(mkPlan(t, "rt47u-bogus", 2, spec{ID: "root"}, spec{ID: "ok"},
		spec{ID: "x", Deps: []string{"root", "ok"}}, spec{ID: "y", Deps: []string{"x"}}))
	if r := h.wait(id); r.State != lifecycle.RunFailed {
		t.Fatalf("run %s", r.State)
	}
	h.stop()
	return id
}

// TestRedTeam47Unskip_BogusNotesAtLoad: run_unskips rows no engine wrote. A row naming a task
// position the run does not have (past its end, or negative) makes Open fail with an error
// naming the run, never a panic. Rows naming a task of an ended run whose dependents are
// held (ok, which succeeded, and the failed root), and a row of a run that does not exist,
// change nothing: no entry, the run stays failed once, its rows are removed.
func TestRedTeam47Unskip_BogusNotesAtLoad(t *testing.T) {
	for _, idx := range []int{4, 1 << 40, -1} {
		t.Run(fmt.Sprint(idx), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orch.db")
			id := failedRun(t, path)
			db := openDB(t, path)
			if _, err := db.SQL().Exec(`INSERT INTO run_unskips(run_id, idx) VALUES (?, ?)`, id, idx); err != nil {
				t.Fatal(err)
			}
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("Open panicked on a note of task %d: %v", idx, p)
					}
				}()
				_, err = orch.Open(context.Background(), db, audit.New(nil), newFakeExec(succeed), orch.Options{})
			}()
			db.Close()
			if err == nil || !strings.Contains(err.Error(), id) {
				t.Errorf("Open with a note of task %d of a run of 4: %v, want an error naming the run", idx, err)
			}
		})
	}
	t.Run("held", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "orch.db")
		id := failedRun(t, path)
		db := openDB(t, path)
		for _, q := range [][]any{{id, 0}, {id, 1}, {"no-such-run", 0}} {
			if _, err := db.SQL().Exec(`INSERT INTO run_unskips(run_id, idx) VALUES (?, ?)`, q...); err != nil {
				t.Fatal(err)
			}
		}
		var entries int
		db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries`).Scan(&entries)
		db.Close()
		h := start(t, path, newFakeExec(succeed))
		barrier(t, h)
		r, err := h.eng.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st := taskStates(r); r.State != lifecycle.RunFailed || st["x"] != lifecycle.TaskSkipped || st["y"] != lifecycle.TaskSkipped {
			t.Errorf("run %s with %v after the bogus notes, want failed, x and y skipped", r.State, st)
		}
		var after int
		h.db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries`).Scan(&after)
		if after != entries {
			t.Errorf("%d audit entries after the open, %d before: bogus notes wrote entries", after, entries)
		}
		if n := unskipsWaiting(t, h, id); n != 0 {
			t.Errorf("%d notes of the run left", n)
		}
	})
}

// TestRedTeam47Unskip_PurgeRemovesNotes: a note left on a run (as a crash could leave no
// engine to drop) goes when retention purges the run.
func TestRedTeam47Unskip_PurgeRemovesNotes(t *testing.T) {
	h := start(t, "", newFakeExec(succeed))
	id := h.runToEnd(mkPlan(t, "rt47u-purge", 2, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}}))
	if r := h.wait(id); !r.Sealed {
		t.Fatal("run not sealed")
	}
	h.waitFolded()
	if _, err := h.db.SQL().Exec(`INSERT INTO run_unskips(run_id, idx) VALUES (?, 0)`, id); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const age = 180 * 24 * time.Hour
	later := time.Now().Add(age + 24*time.Hour)
	its, _, err := retention.PlanRuns(ctx, h.db.SQL(), age, later)
	if err != nil || len(its) != 1 {
		t.Fatalf("planned %+v, %v", its, err)
	}
	var res retention.Result
	if err := retention.PurgeRuns(ctx, h.db, audit.New(nil).SparseTree(), its, age, later, "ops", retention.RoleOperator, &res); err != nil || res.Runs != 1 {
		t.Fatalf("purge: %+v, %v", res, err)
	}
	if n := unskipsWaiting(t, h, id); n != 0 {
		t.Errorf("%d notes of the purged run left", n)
	}
	if _, err := h.eng.Status(ctx, id); !errors.Is(err, orch.ErrNotFound) {
		t.Errorf("status of the purged run: %v", err)
	}
}

// TestRedTeam47Unskip_OtherCauseRetriedWhileUnskipWaits: c waits for root and is cancelled
// while root runs, which skips its 1,000 dependents d_i naming c; then root fails and skips
// its 5,000 a_i. root is retried, and c while root's unskip goes on (before it reaches the
// d_i). The d_i were skipped because c was cancelled, and it is c's retry that takes them
// back: each is unskipped once, naming c, and the run succeeds.
func TestRedTeam47Unskip_OtherCauseRetriedWhileUnskipWaits(t *testing.T) {
	const wide, under = 5000, 1000
	specs := []spec{{ID: "root"}}
	for i := range wide {
		specs = append(specs, spec{ID: fmt.Sprintf("a%d", i), Deps: []string{"root"}})
	}
	specs = append(specs, spec{ID: "c", Deps: []string{"root"}})
	for i := range under {
		specs = append(specs, spec{ID: fmt.Sprintf("d%d", i), Deps: []string{"c"}})
	}
	var mu sync.Mutex
	roots := 0
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID == "root" {
			mu.Lock()
			defer mu.Unlock()
			if roots++; roots == 1 {
				return orch.Outcome{}, false
			}
		}
		return rtOK, true
	})
	obs := &unskipObs{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47u-other-cause", 50, specs...))
	exec.waitHeld(t, id, "root")
	ctx := context.Background()
	if err := h.eng.Cancel(ctx, api.ActionRequest{Run: id, Task: "c", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	exec.finish(t, id, "root", rtFail)
	if r := waitEnded(t, h, id, 10*time.Second); r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != wide+under {
		t.Fatalf("run %s with %v, want failed with %d skipped", r.State, r.Counts, wide+under)
	}
	retried := make(chan error, 1)
	obs.set(func(b orch.Batch, k int) {
		if k == 1 && countKind(b, entry.TaskRetried) > 0 {
			go func() { retried <- h.eng.Retry(ctx, api.ActionRequest{Run: id, Task: "c", Actor: "me"}) }()
			waitQueued(t, h.eng, 1)
		}
	})
	retryRoot(t, h, id)
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	r := waitEnded(t, h, id, 10*time.Second)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s with %v, want succeeded", r.State, r.Counts)
	}
	causes := unskipCauses(t, h, id)
	bad := 0
	for i := range under {
		d := fmt.Sprintf("d%d", i)
		if c := causes[d]; len(c) != 1 || c[0] != "c" {
			if bad++; bad < 5 {
				t.Errorf("%s (skipped naming c) unskipped naming %v; want once naming c, whose retry took it back", d, c)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d tasks skipped because c was cancelled name root as the cause of their unskip", bad, under)
	}
	checkSkipsUnskips(t, h, id)
}

// TestRedTeam47Unskip_FanOutItemRetryStop: item each[beta] of fan-out each fails, which
// skips each, reduce and reduce's 5,000 dependents. Its retry's unskip starts from a task
// the run added (after each and reduce in the run), and the engine stops after its first
// batch. The engine opened next goes on from the note: the run succeeds, reduce fires once
// with the three items, every task is unskipped once naming each[beta], no note is left.
func TestRedTeam47Unskip_FanOutItemRetryStop(t *testing.T) {
	const n = 5000
	var b strings.Builder
	b.WriteString(`version: 1
name: rt47u-item-stop
concurrency: 64
tasks:
  - {id: split, subagent: splitter}
  - id: each
    fan_out:
      from: split
      select: "output:items.json"
      template: {subagent: worker, input: {goal: port}}
  - id: reduce
    subagent: reducer
    needs: {parts: {from: each, select: outputs}}
`)
	for i := range n {
		fmt.Fprintf(&b, "  - {id: z%d, subagent: worker, depends_on: [reduce]}\n", i)
	}
	list := items(t, `[{"id": "alpha"}, {"id": "beta"}, {"id": "gamma"}]`)
	var mu sync.Mutex
	betas := 0
	decide := func(a orch.Attempt) (orch.Outcome, bool) {
		switch a.TaskID {
		case "split":
			return orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": list}}, true
		case "each[beta]":
			mu.Lock()
			defer mu.Unlock()
			if betas++; betas == 1 {
				return rtFail, true
			}
		}
		return rtOK, true
	}
	path := filepath.Join(t.TempDir(), "orch.db")
	obs := &unskipObs{}
	h := startWith(t, path, newRTExec(decide), orch.Options{Observer: obs})
	id := h.submit(parsePlan(t, b.String()))
	if r := waitEnded(t, h, id, 10*time.Second); r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != n+2 {
		t.Fatalf("run %s with %v, want failed with %d skipped", r.State, r.Counts, n+2)
	}
	stopped := false
	obs.set(func(b orch.Batch, k int) {
		if k == 1 && !stopped {
			stopped = true
			h.cancel()
		}
	})
	retryTask(t, h, id, "each[beta]")
	h.stopped()
	if k := notesAt(t, path, id); k != 1 {
		t.Fatalf("%d notes after the stop, want the item's unskip noted", k)
	}
	x := newRTExec(decide)
	h = start(t, path, x)
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != n+6 {
		t.Errorf("run %s with %v, want succeeded with all %d tasks", r.State, r.Counts, n+6)
	}
	var reduce []orch.Attempt
	for _, a := range x.startedList() {
		if a.TaskID == "reduce" {
			reduce = append(reduce, a)
		}
	}
	if len(reduce) != 1 || len(reduce[0].Inputs) != 3 {
		t.Errorf("reduce fired %d times (want once, with each's 3 items)", len(reduce))
	}
	causes := unskipCauses(t, h, id)
	if len(causes) != n+2 {
		t.Errorf("%d tasks unskipped, want %d", len(causes), n+2)
	}
	for task, c := range causes {
		if len(c) != 1 || c[0] != "each[beta]" {
			t.Fatalf("%s unskipped naming %v, want once naming each[beta]", task, c)
		}
	}
	if k := unskipsWaiting(t, h, id); k != 0 {
		t.Errorf("%d unskips noted after the run ended", k)
	}
}

// TestRedTeam47Unskip_RetryMidCascadeStop: root fails with 8,000 dependents; it is retried
// after the cascade's first batch, and the retry is applied after the second (its unskip then
// waits at once, noted, with 3,904 dependents never skipped still pending); the engine stops
// there. The engine opened next reads no cut cascade in the pending tasks (their skipped
// dependencies lead back to root, which is no longer failed), takes back the skipped ones from
// the note, and the run succeeds: each task skipped at most once and unskipped as often, each
// fired once, the run ended once.
func TestRedTeam47Unskip_RetryMidCascadeStop(t *testing.T) {
	const wide = 4000
	path := filepath.Join(t.TempDir(), "orch.db")
	exec := newRTExec(func(a orch.Attempt) (orch.Outcome, bool) {
		if a.TaskID == "root" {
			return orch.Outcome{}, false
		}
		return rtOK, true
	})
	obs := &unskipObs{}
	h := startWith(t, path, exec, orch.Options{Observer: obs})
	id := h.submit(mkPlan(t, "rt47u-mid-cascade", 50, cascadeSpecs(wide)...))
	exec.waitHeld(t, id, "root")
	retried := make(chan error, 1)
	asked, stopped := false, false
	obs.set(func(b orch.Batch, k int) {
		switch {
		case !asked && countKind(b, entry.TaskSkipped) > 0:
			asked = true
			go func() {
				retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "root", Actor: "me"})
			}()
			waitQueued(t, h.eng, 1)
		case asked && !stopped && countKind(b, entry.TaskRetried) > 0:
			stopped = true
			h.cancel()
		}
	})
	exec.finish(t, id, "root", rtFail)
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	h.stopped()
	if k := notesAt(t, path, id); k != 1 {
		t.Fatalf("%d notes after the stop, want the root's unskip noted", k)
	}
	h = start(t, path, newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true }))
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Errorf("run %s with %v, want succeeded with every task", r.State, r.Counts)
	}
	skips, unskips := entryCounts(t, h, id, entry.TaskSkipped), entryCounts(t, h, id, entry.TaskUnskipped)
	for task, k := range skips {
		if k != 1 || unskips[task] != 1 {
			t.Fatalf("%s skipped %d times, unskipped %d; want once each", task, k, unskips[task])
		}
	}
	if len(unskips) != len(skips) || len(skips) == 0 || len(skips) == 2*wide {
		t.Errorf("%d tasks skipped, %d unskipped: want some (not all) skipped, each unskipped", len(skips), len(unskips))
	}
	for task, k := range entryCounts(t, h, id, entry.TaskFired) {
		if want := map[bool]int{true: 2, false: 1}[task == "root"]; k != want {
			t.Errorf("%s fired %d times, want %d", task, k, want)
		}
	}
	checkEndsNoNote(t, h, id, 1)
}

// TestRedTeam47Unskip_TakeoverThenStop: root's retried attempt fails while the retry's unskip
// goes on; root is retried again while both its second skip cascade and the unskip wait, so
// a second unskip goes on beside the waiting one, sharing its note; the engine stops right after.
// The engine opened next goes on from the note: the run succeeds, each task alternates skips
// and unskips (each unskip naming root) and fires once, the run ends twice in all (failed,
// succeeded), and no note is left.
func TestRedTeam47Unskip_TakeoverThenStop(t *testing.T) {
	const wide = 4000
	path := filepath.Join(t.TempDir(), "orch.db")
	exec := rootFailsThenHeld()
	obs := &unskipObs{}
	h := startFolding(t, path, exec, obs)
	id := h.submit(mkPlan(t, "rt47u-takeover-stop", 50, cascadeSpecs(wide)...))
	h.wait(id)
	retried := make(chan error, 1)
	failed, asked, stopped := false, false, false
	obs.set(func(b orch.Batch, k int) {
		switch {
		case k == 2 && !failed:
			failed = exec.finishNow(id, "root", rtFail)
		case failed && !asked && countKind(b, entry.TaskFailed) > 0:
			asked = true
			go func() {
				retried <- h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "root", Actor: "me"})
			}()
			waitQueued(t, h.eng, 1)
		case asked && !stopped && countKind(b, entry.TaskRetried) > 0:
			stopped = true
			h.cancel()
		}
	})
	retryRoot(t, h, id)
	if err := <-retried; err != nil {
		t.Fatal(err)
	}
	h.stopped()
	if !stopped {
		t.Fatal("the second retry was never committed")
	}
	if k := notesAt(t, path, id); k != 1 {
		t.Fatalf("%d notes after the stop, want the root's unskip noted", k)
	}
	h = startFolding(t, path, newRTExec(func(a orch.Attempt) (orch.Outcome, bool) { return rtOK, true }), nil)
	r := waitEnded(t, h, id, 20*time.Second)
	if r.State != lifecycle.RunSucceeded || r.Counts[lifecycle.TaskSucceeded] != 2*wide+1 {
		t.Fatalf("run %s with %v, want succeeded with every task", r.State, r.Counts)
	}
	checkSkipsUnskips(t, h, id)
	skips, unskips := entryCounts(t, h, id, entry.TaskSkipped), entryCounts(t, h, id, entry.TaskUnskipped)
	for task, k := range skips {
		if unskips[task] != k {
			t.Fatalf("%s skipped %d times, unskipped %d", task, k, unskips[task])
		}
	}
	for task, c := range unskipCauses(t, h, id) {
		for _, x := range c {
			if x != "root" {
				t.Fatalf("%s unskipped naming %s", task, x)
			}
		}
	}
	for task, k := range entryCounts(t, h, id, entry.TaskFired) {
		if want := map[bool]int{true: 3, false: 1}[task == "root"]; k != want {
			t.Errorf("%s fired %d times, want %d", task, k, want)
		}
	}
	checkEndsNoNote(t, h, id, 2)
}
