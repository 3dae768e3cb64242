package orch_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/verdict"
)

// startHooked starts an engine on path (a new file when "") with exec and obs (nil: none),
// after hook has set its test knobs; it stops when the test ends.
func startHooked(t *testing.T, path string, exec orch.Executor, obs orch.Observer, hook func(*orch.Engine)) *harness {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "orch.db")
	}
	db := openDB(t, path)
	eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, orch.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		hook(eng)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{tb: t, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- eng.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

// everyCommitRows reads how many rows the row log holds after every commit and keeps the
// most, and the most seen before the first commit that skips a task.
type everyCommitRows struct {
	commitCount
	t       *testing.T
	db      *sql.DB
	most    atomic.Int64
	before  atomic.Int64
	skipped atomic.Bool
}

func (o *everyCommitRows) Committed(b orch.Batch) {
	for _, e := range b.Entries {
		if e.Kind == "orch.task.skipped" {
			o.skipped.Store(true)
		}
	}
	n, err := orch.LogRows(context.Background(), o.db)
	if err != nil {
		o.t.Error(err)
		return
	}
	if int64(n) > o.most.Load() {
		o.most.Store(int64(n))
	}
	if !o.skipped.Load() && int64(n) > o.before.Load() {
		o.before.Store(int64(n))
	}
}

// TestRedteam47s_RowBoundHoldsBehindSmallRecords attacks the row bound of the row log. A
// busy engine keeps many small records waiting (a chain of tasks fired and ended one at a
// time, never idle, its run not sealed); then a skip cascade writes records of up to 2,048
// rows each, behind the busy run's small ones: a fold of a fixed count of records would let
// the cascade's pile up behind them. The test expects what TestFold_RowsBounded allows: the
// log never holds more than the bound plus two cascade batches of rows, and
// the run's counts survive a stop and reopen.
func TestRedteam47s_RowBoundHoldsBehindSmallRecords(t *testing.T) {
	const bound, chain, wide = 2000, 300, 5000
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "root" {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	path := filepath.Join(t.TempDir(), "orch.db")
	seen := &everyCommitRows{t: t}
	h := startRowBounded(t, path, exec, bound, seen)
	seen.db = h.db.SQL()

	var specs []spec
	for i := range chain {
		s := spec{ID: fmt.Sprintf("c%d", i)}
		if i > 0 {
			s.Deps = []string{fmt.Sprintf("c%d", i-1)}
		}
		specs = append(specs, s)
	}
	cs := cascadeSpecs(wide)
	cs[0].Deps = []string{fmt.Sprintf("c%d", chain-1)}
	specs = append(specs, cs...)
	id := h.submit(mkPlan(t, "rows-behind", 1, specs...))
	r := h.wait(id)
	skipped := r.Counts[lifecycle.TaskSkipped]
	if r.State != lifecycle.RunFailed || skipped != 2*wide {
		t.Fatalf("run %s with %v, want failed with %d skipped", r.State, r.Counts, 2*wide)
	}
	if b := seen.before.Load(); b > bound {
		t.Fatalf("the chain alone left %d rows waiting, over the bound %d: the plan does not test what it should", b, bound)
	}
	if n := seen.most.Load(); n > bound+2*orch.CascadeBatch {
		t.Errorf("the row log held %d rows during a cascade of %d skips (at most %d before it); the bound is %d, "+
			"%d with two cascade batches", n, skipped, seen.before.Load(), bound, bound+2*orch.CascadeBatch)
	}
	h.stop()
	h2 := startWith(t, path, exec, orch.Options{})
	if again := h2.wait(id); again.State != lifecycle.RunFailed || !reflect.DeepEqual(again.Counts, r.Counts) {
		t.Errorf("reopened: %s, %v; before: %v", again.State, again.Counts, r.Counts)
	}
}

// hostile is text a task's reason, detail or question may hold: quotes, backslashes,
// newlines, U+2028 and U+2029, a closing script tag, a NUL, and length. (The audit log
// refuses text that is not UTF-8.)
var hostile = "a \"quoted\" \\back\\slash\nnew line\r\n\t tab \u2028 \u2029 </script><!-- \x00 nul \U0001F600 " +
	strings.Repeat("long ", 2000)

// verdictFor is a verdict that names the dispatch it belongs to (its command's second word).
func verdictFor(dispatchID string, passed bool) *verdict.Verdict {
	cmd := []string{"check", dispatchID}
	v := verdict.Green(cmd, time.Millisecond, verdict.TailText{})
	if !passed {
		v = verdict.Red("exit-status", "exit status 1", 1, cmd, time.Millisecond, verdict.TailText{})
	}
	return &v
}

// checkRunView checks one read of a run: counts agree with the states of its tasks, the
// tasks are in plan order, every task's dispatches are its attempts (as many as Attempts,
// its current dispatch the newest), its verdict is its current dispatch's, and Next names
// exactly the tasks that ask a question. It returns what it finds wrong.
func checkRunView(r api.Run, tasks []api.Task, order []string) []string {
	var bad []string
	tally := map[string]int{}
	var asking []string
	for i, task := range tasks {
		if i < len(order) && task.ID != order[i] {
			bad = append(bad, fmt.Sprintf("task %d is %s, the plan's is %s", i, task.ID, order[i]))
		}
		if task.State != "" {
			tally[task.State]++
		}
		if task.State == lifecycle.TaskNeedsInput {
			asking = append(asking, task.ID)
		}
		if len(task.Dispatches) != task.Attempts {
			bad = append(bad, fmt.Sprintf("task %s: %d attempts, dispatches %v", task.ID, task.Attempts, task.Dispatches))
		}
		seen := map[string]bool{}
		for _, d := range task.Dispatches {
			if seen[d] {
				bad = append(bad, fmt.Sprintf("task %s: dispatch %s listed twice", task.ID, d))
			}
			seen[d] = true
		}
		if task.DispatchID != "" && (len(task.Dispatches) == 0 || task.Dispatches[len(task.Dispatches)-1] != task.DispatchID) {
			bad = append(bad, fmt.Sprintf("task %s: current dispatch %s, dispatches %v", task.ID, task.DispatchID, task.Dispatches))
		}
		if task.Verdict != nil && (len(task.Verdict.Command) != 2 || task.Verdict.Command[1] != task.DispatchID) {
			bad = append(bad, fmt.Sprintf("task %s: verdict of %v with current dispatch %s", task.ID, task.Verdict.Command, task.DispatchID))
		}
	}
	if len(tasks) != r.Total {
		bad = append(bad, fmt.Sprintf("%d tasks of %d", len(tasks), r.Total))
	}
	for s, n := range r.Counts {
		if n != tally[s] {
			bad = append(bad, fmt.Sprintf("counts say %d %s, the tasks %d", n, s, tally[s]))
		}
	}
	for s, n := range tally {
		if r.Counts[s] != n {
			bad = append(bad, fmt.Sprintf("counts say %d %s, the tasks %d", r.Counts[s], s, n))
		}
	}
	if (len(asking) == 0) != (r.Next == "") {
		bad = append(bad, fmt.Sprintf("next %q with %v asking", r.Next, asking))
	}
	for _, a := range asking {
		if !strings.Contains(r.Next, a) {
			bad = append(bad, fmt.Sprintf("next %q leaves out %s", r.Next, a))
		}
	}
	return bad
}

// retryingExec fails the first fails attempts of each task named r* (retryable, a red
// verdict each) and succeeds the next (a green verdict); a task named ask asks a hostile
// question, one named bad fails for good with a hostile detail, one named hold runs until the
// test ends; every other task succeeds.
func retryingExec(t *testing.T, fails int) *fakeExec {
	end := make(chan struct{})
	t.Cleanup(func() { close(end) })
	return newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch {
		case strings.HasPrefix(a.TaskID, "r"):
			if a.Number <= fails {
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonWorkerFailed, Detail: hostile,
					Verdict: verdictFor(a.DispatchID, false)}
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded, Verdict: verdictFor(a.DispatchID, true)}
		case a.TaskID == "ask":
			return orch.Outcome{State: lifecycle.TaskNeedsInput, Question: hostile}
		case a.TaskID == "bad":
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: hostile}
		case a.TaskID == "hold":
			<-end
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
}

// retrySpecs is hold, ask, bad and its dependent, and n tasks r0... that retry up to four
// times.
func retrySpecs(n int) []spec {
	specs := []spec{{ID: "hold"}, {ID: "ask"}, {ID: "bad"}, {ID: "after-bad", Deps: []string{"bad"}}}
	for i := range n {
		specs = append(specs, spec{ID: fmt.Sprintf("r%d", i),
			Retry: map[string]any{"max_attempts": 4, "initial_backoff": "1ms", "max_backoff": "2ms"}})
	}
	return specs
}

func specOrder(specs []spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.ID
	}
	return out
}

// TestRedteam47s_UnfoldedReadIsTheFoldedRead attacks the two-cursor merge of task and attempt
// rows with the row log's overlay. Tasks retry three times (four dispatches each, a verdict
// on every one), a task asks a question, one fails and skips its dependent, one keeps
// running, and reason, detail and question hold hostile text; nothing is folded while the
// run goes on. The status read with every record unfolded must pass checkRunView and be the
// very status read after the engine stops and the log is folded (ReadStatus with no engine),
// and StatusEach must hand over the same tasks.
func TestRedteam47s_UnfoldedReadIsTheFoldedRead(t *testing.T) {
	exec := retryingExec(t, 3)
	h := startHooked(t, "", exec, nil, func(e *orch.Engine) {
		orch.SetFoldIdle(e, time.Hour)
		orch.SetFoldBound(e, 1<<20)
		orch.SetFoldRows(e, 1<<30)
	})
	specs := retrySpecs(20)
	id := h.submit(mkPlan(t, "unfolded", 8, specs...))
	ctx := context.Background()
	var unfolded api.Run
	agoratest.WaitFor(t, 30*time.Second, "every retrying task to succeed and ask to ask", func() bool {
		r, err := h.eng.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		unfolded = r
		return r.Counts[lifecycle.TaskSucceeded] == 20 && r.Counts[lifecycle.TaskNeedsInput] == 1 &&
			r.Counts[lifecycle.TaskSkipped] == 1 && r.Counts[lifecycle.TaskRunning] == 1
	})
	if n, err := orch.LogRows(ctx, h.db.SQL()); err != nil || n == 0 {
		t.Fatalf("the row log holds %d rows (%v): the read was not of unfolded records", n, err)
	}
	for _, bad := range checkRunView(unfolded, unfolded.Tasks, specOrder(specs)) {
		t.Error("unfolded: " + bad)
	}
	for _, task := range unfolded.Tasks {
		if strings.HasPrefix(task.ID, "r") && (len(task.Dispatches) != 4 || task.Verdict == nil || !task.Verdict.Passed) {
			t.Errorf("task %s: dispatches %v, verdict %+v; want four and the last one's green verdict", task.ID, task.Dispatches, task.Verdict)
		}
	}
	var handed []api.Task
	each, err := h.eng.StatusEach(ctx, id, func(_ *api.Run, task *api.Task) error {
		handed = append(handed, *task)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	each.Tasks = handed
	if !reflect.DeepEqual(agoratest.PlainJSON(t, each), agoratest.PlainJSON(t, unfolded)) {
		t.Error("StatusEach's tasks and run differ from Status's over the same records")
	}

	h.stop() // folds every record
	db := openDB(t, h.path)
	defer db.Close()
	var waiting int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM row_log`).Scan(&waiting); err != nil || waiting != 0 {
		t.Fatalf("%d records wait after the stop (%v)", waiting, err)
	}
	folded, err := orch.ReadStatus(ctx, db.SQL(), id)
	if err != nil {
		t.Fatal(err)
	}
	a, b := agoratest.PlainJSON(t, unfolded), agoratest.PlainJSON(t, folded)
	if !reflect.DeepEqual(a, b) {
		for i := range min(len(unfolded.Tasks), len(folded.Tasks)) {
			if x, y := agoratest.PlainJSON(t, unfolded.Tasks[i]), agoratest.PlainJSON(t, folded.Tasks[i]); !reflect.DeepEqual(x, y) {
				t.Errorf("task %s unfolded %v\nfolded %v", unfolded.Tasks[i].ID, x, y)
			}
		}
		unfolded.Tasks, folded.Tasks = nil, nil
		t.Errorf("the unfolded read differs from the folded one: run %v\nfolded %v", agoratest.PlainJSON(t, unfolded), agoratest.PlainJSON(t, folded))
	}
}

// TestRedteam47s_StatusConsistentWhileBusy attacks the read's consistency while the engine
// commits: tasks retry with a verdict on each attempt, a failed root skips thousands of
// dependents in cascade batches, the root is retried (its dependents unskipped in batches
// too) and the run ends, all while two commits out of three fold part of the log. A reader
// reads the run over and over with StatusEach; every read must pass checkRunView, and the
// run StatusEach returns must have the counts of the tasks it handed over.
func TestRedteam47s_StatusConsistentWhileBusy(t *testing.T) {
	const wide = 1100 // 2,200 skips: more than one cascade batch
	var mu sync.Mutex
	rootTries := 0
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch {
		case a.TaskID == "root":
			mu.Lock()
			rootTries++
			first := rootTries == 1
			mu.Unlock()
			if first {
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: hostile, Verdict: verdictFor(a.DispatchID, false)}
			}
		case strings.HasPrefix(a.TaskID, "r") && a.Number <= 2:
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonWorkerFailed, Detail: "flaky",
				Verdict: verdictFor(a.DispatchID, false)}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded, Verdict: verdictFor(a.DispatchID, true)}
	})
	h := startFolding(t, filepath.Join(t.TempDir(), "orch.db"), exec, nil)
	specs := cascadeSpecs(wide)
	for i := range 30 {
		specs = append(specs, spec{ID: fmt.Sprintf("r%d", i),
			Retry: map[string]any{"max_attempts": 4, "initial_backoff": "1ms", "max_backoff": "2ms"}})
	}
	order := specOrder(specs)
	id := h.submit(mkPlan(t, "busy", 20, specs...))
	ctx := context.Background()

	stop, poke := make(chan struct{}), make(chan struct{})
	var reads atomic.Int64
	var problems []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		events, unsub := h.eng.Subscribe(id)
		defer func() { unsub() }()
		for {
			// A read after each burst of events (a commit's), or when poked: a reader that
			// never paused would take the CPU the engine needs to go on.
			select {
			case <-stop:
				return
			case <-poke:
			case _, ok := <-events:
				if !ok { // fell behind: watch again
					unsub()
					events, unsub = h.eng.Subscribe(id)
				}
			}
		drained:
			for {
				select {
				case _, ok := <-events:
					if !ok {
						break drained
					}
				default:
					break drained
				}
			}
			var handed []api.Task
			r, err := h.eng.StatusEach(ctx, id, func(_ *api.Run, task *api.Task) error {
				handed = append(handed, *task)
				return nil
			})
			if err != nil {
				problems = append(problems, err.Error())
				return
			}
			reads.Add(1)
			for _, bad := range checkRunView(r, handed, order) {
				problems = append(problems, fmt.Sprintf("read %d (run %s): %s", reads.Load(), r.State, bad))
			}
			if len(problems) > 20 {
				return
			}
		}
	}()
	r := h.wait(id)
	if r.State != lifecycle.RunFailed || r.Counts[lifecycle.TaskSkipped] != 2*wide {
		t.Errorf("run %s with %v, want failed with %d skipped", r.State, r.Counts, 2*wide)
	}
	if err := h.eng.Retry(ctx, api.ActionRequest{Run: id, Task: "root", Actor: "me"}); err != nil {
		t.Fatal(err)
	}
	r = h.wait(id, lifecycle.RunSucceeded)
	before := reads.Load()
	poke <- struct{}{}
	agoratest.WaitFor(t, 30*time.Second, "the reader to read the ended run", func() bool { return reads.Load() > before })
	close(stop)
	<-done
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d reads", reads.Load())
	if reads.Load() < 3 {
		t.Errorf("only %d reads", reads.Load())
	}
	if r.Counts[lifecycle.TaskSucceeded] != r.Total {
		t.Errorf("after the retry: %v of %d", r.Counts, r.Total)
	}
}

// TestRedteam47s_NotFoundAndDamagedRecords attacks the errors: a run that is not there, by
// an id-like or name-like ref, must give the same not-found error through Status,
// StatusEach, Summary and ReadStatus (errors.Is ErrNotFound, the same message); a row log
// record that does not decode, read with the tables by ReadStatus, must be an error naming
// the log, not a panic and not a status.
func TestRedteam47s_NotFoundAndDamagedRecords(t *testing.T) {
	h := start(t, "", newFakeExec(succeed))
	id := h.runToEnd(mkPlan(t, "there", 2, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}}))
	ctx := context.Background()
	for _, ref := range []string{"nope", "run-00000000000000000000000000", "", "there ", "%"} {
		_, e1 := h.eng.Status(ctx, ref)
		_, e2 := h.eng.StatusEach(ctx, ref, func(*api.Run, *api.Task) error { return errors.New("a task was handed over") })
		_, e3 := h.eng.Summary(ctx, ref)
		_, e4 := orch.ReadStatus(ctx, h.db.SQL(), ref)
		for i, err := range []error{e1, e2, e3, e4} {
			if !errors.Is(err, orch.ErrNotFound) {
				t.Errorf("ref %q, read %d: %v, want not found", ref, i+1, err)
			} else if err.Error() != e1.Error() {
				t.Errorf("ref %q, read %d: %q, Status says %q", ref, i+1, err, e1)
			}
		}
	}
	h.stop()

	for _, record := range [][]byte{{0x00}, {0xff, 0xff, 0xff, 0xff}, []byte("not a record"), {}} {
		db := openDB(t, h.path)
		if _, err := db.SQL().Exec(`INSERT INTO row_log(record, runs) VALUES (?, ?)`, record, `["`+id+`"]`); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("record %x: a status read panicked: %v", record, p)
				}
			}()
			r, err := orch.ReadStatus(ctx, db.SQL(), id)
			if err == nil {
				t.Errorf("record %x: read a status of %d tasks over a damaged record", record, len(r.Tasks))
			} else if !strings.Contains(err.Error(), "row log") {
				t.Errorf("record %x: %v, want an error naming the row log", record, err)
			}
		}()
		if _, err := db.SQL().Exec(`DELETE FROM row_log`); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
}
