package orch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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
	"github.com/agora-dev/agora/internal/verdict"
)

func parsePlan(tb testing.TB, src string) *plan.Plan {
	tb.Helper()
	p, err := plan.Parse("p.yaml", []byte(src))
	if err != nil {
		tb.Fatalf("parse plan: %v", err)
	}
	return p
}

const fanOutPlan = `version: 1
name: fan
concurrency: 8
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
`

// items is a list as the executor reads it.
func items(tb testing.TB, src string) orch.ItemList {
	tb.Helper()
	it, err := orch.DecodeItems([]byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	return orch.ItemList{Items: it}
}

// batches records the committed batches' entry kinds (an Observer).
type batches struct {
	mu    sync.Mutex
	kinds [][]string
}

func (b *batches) Committed(x orch.Batch) {
	var ks []string
	for _, e := range x.Entries {
		ks = append(ks, e.Kind+" "+e.Subject)
	}
	b.mu.Lock()
	b.kinds = append(b.kinds, ks)
	b.mu.Unlock()
}
func (b *batches) LockWait(string, string, string, string) {}
func (b *batches) Reattached(orch.Attempt)                 {}

// batchOf is the batch that holds an entry of kind about subject.
func (b *batches) batchOf(kind, subject string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ks := range b.kinds {
		if slices.Contains(ks, kind+" "+subject) {
			return ks
		}
	}
	return nil
}

func startWith(tb testing.TB, path string, exec orch.Executor, opts orch.Options) *harness {
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

// TestEngine_FanOut: the producer's list adds one task per item in the transaction that ends
// the producer, with one orch.run.extended entry; each item's input carries its item; the
// reduce receives every item's product under its key; the fan-out succeeds with its items.
func TestEngine_FanOut(t *testing.T) {
	list := items(t, `[{"id": "alpha", "n": 1}, {"id": "beta"}, 7]`)
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		o := orch.Outcome{State: lifecycle.TaskSucceeded}
		if a.TaskID == "split" {
			if !slices.Equal(a.Lists, []string{"items.json"}) {
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "worker-failed", Detail: fmt.Sprintf("lists %v", a.Lists)}
			}
			o.Items = map[string]orch.ItemList{"items.json": list}
		}
		return o
	})
	obs := &batches{}
	h := startWith(t, "", exec, orch.Options{Observer: obs})
	id := h.runToEnd(parsePlan(t, fanOutPlan))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s: %v", r.State, taskStates(r))
	}
	want := map[string]string{"split": "succeeded", "each": "succeeded", "reduce": "succeeded",
		"each[alpha]": "succeeded", "each[beta]": "succeeded", "each[2]": "succeeded"}
	if got := taskStates(r); !mapsEqual(got, want) {
		t.Errorf("tasks %v, want %v", got, want)
	}
	for _, task := range r.Tasks {
		if strings.HasPrefix(task.ID, "each[") && (task.Added == nil || *task.Added != (api.Added{Cause: "fan_out", Task: "each"})) {
			t.Errorf("task %s added %+v, want by fan_out of each", task.ID, task.Added)
		}
		if !strings.HasPrefix(task.ID, "each[") && task.Added != nil {
			t.Errorf("plan task %s says it was added: %+v", task.ID, task.Added)
		}
	}
	// The extension is in the batch that ends split.
	ks := obs.batchOf("orch.task.succeeded", "run/"+id+"/task/split")
	if !slices.Contains(ks, "orch.run.extended run/"+id+"/task/each") {
		t.Errorf("split's end and the extension are not one transaction: %v", ks)
	}
	inputs := map[string]string{}
	var reduce orch.Attempt
	for _, a := range exec.attempts() {
		inputs[a.TaskID] = string(a.Input)
		if a.TaskID == "reduce" {
			reduce = a
		}
	}
	if got, want := inputs["each[alpha]"], `{"goal":"port","item":{"id":"alpha","n":1}}`; got != want {
		t.Errorf("each[alpha] input %s, want %s", got, want)
	}
	if got, want := inputs["each[2]"], `{"goal":"port","item":7}`; got != want {
		t.Errorf("each[2] input %s, want %s", got, want)
	}
	var dirs []string
	for _, in := range reduce.Inputs {
		dirs = append(dirs, in.Key+"/"+in.Dir+"<-"+in.FromTask)
		if in.FromDispatch == "" || exec.byID[in.FromDispatch].TaskID != in.FromTask {
			t.Errorf("reduce input %+v is not the product of %s's attempt", in, in.FromTask)
		}
	}
	if want := []string{"parts/alpha<-each[alpha]", "parts/beta<-each[beta]", "parts/2<-each[2]"}; !slices.Equal(dirs, want) {
		t.Errorf("reduce inputs %v, want %v", dirs, want)
	}
	ext := auditOf(t, h, id, "orch.run.extended")
	if len(ext) != 0 {
		t.Errorf("the extension's entry is about the run, not a task of it: %+v", ext)
	}
	recs := auditAbout(t, h, "run/"+id+"/task/each", "orch.run.extended")
	if len(recs) != 1 {
		t.Fatalf("%d orch.run.extended entries, want 1", len(recs))
	}
	d := recs[0].Details
	if d["cause"] != "fan_out" || d["task"] != "each" || fmt.Sprint(d["count"]) != "3" || fmt.Sprint(d["ids"]) != "[each[alpha] each[beta] each[2]]" {
		t.Errorf("extended entry details %v", d)
	}
	if d["from_dispatch"] != r.Tasks[0].DispatchID {
		t.Errorf("extended from %v, want split's attempt %s", d["from_dispatch"], r.Tasks[0].DispatchID)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// auditAbout returns the orch.db entries of kind with exactly subject.
func auditAbout(t *testing.T, h *harness, subject, kind string) []audit.Record {
	t.Helper()
	all, err := audit.List(context.Background(), h.db.SQL(), audit.ListOptions{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, a := range all {
		if a.Subject == subject {
			out = append(out, a)
		}
	}
	return out
}

// TestEngine_FanOutSurvivesRestart: the added tasks are loaded back after a restart, with
// their state; the reduce sees every item; a status read without an engine shows them.
func TestEngine_FanOutSurvivesRestart(t *testing.T) {
	list := items(t, `[{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}]`)
	hold := make(chan struct{})
	first := newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch {
		case a.TaskID == "split":
			return orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": list}}
		case a.TaskID == "each[a]":
			return orch.Outcome{State: lifecycle.TaskSucceeded}
		}
		<-hold // the others never end under this engine
		return orch.Outcome{State: lifecycle.TaskFailed}
	})
	path := filepath.Join(t.TempDir(), "orch.db")
	h := start(t, path, first)
	id := h.submit(parsePlan(t, fanOutPlan))
	agoratest.WaitFor(t, 10*time.Second, "each[a] and five attempts", func() bool {
		r, _ := h.eng.Status(context.Background(), id)
		return stateOf(r, "each[a]") == lifecycle.TaskSucceeded && len(first.attempts()) == 5
	})
	h.stop()
	close(hold)

	db, err := store.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	offline, err := orch.ReadStatus(context.Background(), db.SQL(), id)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if offline.Total != 7 || stateOf(offline, "each[d]") != lifecycle.TaskRunning || offline.Tasks[6].Added == nil {
		t.Fatalf("offline status: %d tasks, each[d] %s, added %+v", offline.Total, stateOf(offline, "each[d]"), offline.Tasks[6].Added)
	}

	second := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "split" {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "worker-failed", Detail: "split fired again after the restart"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h2 := start(t, path, second)
	r := h2.wait(id)
	if r.State != lifecycle.RunSucceeded || r.Total != 7 {
		t.Fatalf("after the restart the run is %s with %d tasks: %v", r.State, r.Total, taskStates(r))
	}
	var reattached []string
	var reduce orch.Attempt
	for _, a := range second.attempts() {
		reattached = append(reattached, a.TaskID)
		if a.TaskID == "reduce" {
			reduce = a
		}
	}
	slices.Sort(reattached)
	if want := []string{"each[b]", "each[c]", "each[d]", "reduce"}; !slices.Equal(reattached, want) {
		t.Errorf("after the restart %v started, want %v", reattached, want)
	}
	if len(reduce.Inputs) != 4 || reduce.Inputs[0].Dir != "a" || reduce.Inputs[3].Dir != "d" {
		t.Errorf("reduce inputs %+v, want the 4 items", reduce.Inputs)
	}
	if n := len(auditAbout(t, h2, "run/"+id+"/task/each", "orch.run.extended")); n != 1 {
		t.Errorf("%d extension entries, want 1", n)
	}
}

func stateOf(r api.Run, id string) string {
	for _, t := range r.Tasks {
		if t.ID == id {
			return t.State
		}
	}
	return ""
}

// TestEngine_FanOutRefused: a list that cannot be used fails the fan-out with its reason and
// skips its dependents; the producer still succeeded, and nothing was added.
func TestEngine_FanOutRefused(t *testing.T) {
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "split" {
			return orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": {Err: "10001 items; at most 10000"}}}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	r := h.wait(h.runToEnd(parsePlan(t, fanOutPlan)))
	if r.State != lifecycle.RunFailed || r.Total != 3 {
		t.Fatalf("run %s with %d tasks, want failed with 3", r.State, r.Total)
	}
	if got := taskStates(r); got["split"] != "succeeded" || got["each"] != "failed" || got["reduce"] != "skipped" {
		t.Errorf("tasks %v", got)
	}
	each := r.Tasks[1]
	if each.Reason != "fan-out-refused" || each.Detail != "task split's output items.json: 10001 items; at most 10000" {
		t.Errorf("each failed %s: %s", each.Reason, each.Detail)
	}
	err := h.eng.Retry(context.Background(), api.ActionRequest{Run: r.ID, Task: "each", Actor: "t"})
	if want := "conflict: task each is a fan-out: retry the item that failed, or its producer split"; err == nil || err.Error() != want {
		t.Errorf("retry of the fan-out itself: %v, want %s", err, want)
	}
}

// TestEngine_FanOutItemFailsThenRetried: an item that fails skips the fan-out and the reduce,
// naming it; retrying the item brings them back.
func TestEngine_FanOutItemFailsThenRetried(t *testing.T) {
	var mu sync.Mutex
	failed := false
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch a.TaskID {
		case "split":
			return orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": items(t, `["x", "y"]`)}}
		case "each[1]":
			mu.Lock()
			defer mu.Unlock()
			if !failed {
				failed = true
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "denied"}
			}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	id := h.runToEnd(parsePlan(t, fanOutPlan))
	r := h.wait(id)
	if got := taskStates(r); r.State != lifecycle.RunFailed || got["each"] != "skipped" || got["reduce"] != "skipped" || got["each[1]"] != "failed" {
		t.Fatalf("run %s: %v", r.State, got)
	}
	if d := r.Tasks[1].Detail; d != "task each[1] failed" {
		t.Errorf("each skipped: %q", d)
	}
	if err := h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: "each[1]", Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	r = h.wait(id, lifecycle.RunSucceeded)
	if got := taskStates(r); got["each"] != "succeeded" || got["reduce"] != "succeeded" {
		t.Errorf("after the retry: %v", got)
	}
}

// TestEngine_FanOutEmpty: an empty list makes the fan-out done at once.
func TestEngine_FanOutEmpty(t *testing.T) {
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "split" {
			return orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": items(t, `[]`)}}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	r := h.wait(h.runToEnd(parsePlan(t, fanOutPlan)))
	if r.State != lifecycle.RunSucceeded || r.Total != 3 {
		t.Fatalf("run %s, %d tasks: %v", r.State, r.Total, taskStates(r))
	}
}

// TestEngine_FanOutTooManyProducts: a task whose needs would hand it more products than a
// dispatch mounts fails unfired, saying so.
func TestEngine_FanOutTooManyProducts(t *testing.T) {
	var b strings.Builder
	b.WriteByte('[')
	for i := range orch.MaxAttemptInputs + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, i)
	}
	b.WriteByte(']')
	list := items(t, b.String())
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "split" {
			return orch.Outcome{State: lifecycle.TaskSucceeded, Items: map[string]orch.ItemList{"items.json": list}}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	r := h.wait(h.runToEnd(parsePlan(t, fanOutPlan)))
	reduce := r.Tasks[2]
	if reduce.State != lifecycle.TaskFailed || reduce.Reason != "denied" || !strings.Contains(reduce.Detail, "hand it 1025 products; at most 1024") || reduce.Attempts != 0 {
		t.Errorf("reduce %s %s %q after %d attempts", reduce.State, reduce.Reason, reduce.Detail, reduce.Attempts)
	}
}

// reviewPlan has a task with a review of three and a fix loop, and a dependent.
func reviewPlan(approve, fixes int) string {
	onFail := ""
	if fixes > 0 {
		onFail = fmt.Sprintf("\n    on_fail: {fix: {subagent: fixer, max_attempts: %d}}", fixes)
	}
	return fmt.Sprintf(`version: 1
name: rev
tasks:
  - id: t
    subagent: coder
    input: {goal: fix it}
    review: {subagents: [r1, r2, r3], approve: %d}%s
  - id: after
    subagent: worker
    needs: {work: {from: t, select: patch}}
`, approve, onFail)
}

// votes decides reviewers' reviews by task id; a task absent approves.
func reviewer(votes map[string]orch.Review) func(a orch.Attempt) orch.Outcome {
	return func(a orch.Attempt) orch.Outcome {
		o := orch.Outcome{State: lifecycle.TaskSucceeded}
		if a.Review {
			v, ok := votes[a.TaskID]
			if !ok {
				v = orch.Review{Approve: true, Reasons: []string{}}
			}
			o.Review = &v
		}
		return o
	}
}

// TestEngine_ReviewQuorumApproves: at the threshold the work is approved: the task succeeds
// with its own attempt's product, after orch.task.reviewed.
func TestEngine_ReviewQuorumApproves(t *testing.T) {
	exec := newFakeExec(reviewer(map[string]orch.Review{"t.review-r3": {Approve: false, Reasons: []string{"too clever"}}}))
	h := start(t, "", exec)
	id := h.runToEnd(parsePlan(t, reviewPlan(2, 0)))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s: %v", r.State, taskStates(r))
	}
	if r.Total != 5 {
		t.Errorf("%d tasks, want t, after and 3 reviewers", r.Total)
	}
	var tAttempt, after orch.Attempt
	for _, a := range exec.attempts() {
		switch a.TaskID {
		case "t":
			tAttempt = a
		case "after":
			after = a
		case "t.review-r1":
			if len(a.Inputs) != 1 || a.Inputs[0].Key != "patch" || a.Inputs[0].Select != "patch" || a.Inputs[0].FromTask != "t" {
				t.Errorf("reviewer inputs %+v, want t's patch", a.Inputs)
			}
			// The reviewer is told where the work is and that its review is its final
			// answer, in the one form the host reads.
			var in struct {
				Input  map[string]any `json:"input"`
				Review string         `json:"review"`
				Task   string         `json:"task"`
			}
			if err := json.Unmarshal(a.Input, &in); err != nil || in.Task != "t" || in.Input["goal"] != "fix it" ||
				!strings.HasPrefix(string(a.Input), `{"input":{"goal":"fix it"},"review":"You review the work of task t: `) ||
				!strings.Contains(in.Review, "/agora/inputs/patch/patch.diff") || strings.Contains(in.Review, "verify.json") ||
				!strings.Contains(in.Review, `your final answer and nothing else: reply with exactly one JSON object, {"approve": true|false, "reasons": ["..."]}`) {
				t.Errorf("reviewer input %s", a.Input)
			}
		}
	}
	if after.Inputs[0].FromDispatch != tAttempt.DispatchID {
		t.Errorf("after got %s, want t's attempt %s", after.Inputs[0].FromDispatch, tAttempt.DispatchID)
	}
	rev := auditAbout(t, h, "run/"+id+"/task/t", "orch.task.reviewed")
	if len(rev) != 1 || rev[0].Details["approved"] != true || fmt.Sprint(rev[0].Details["approvals"]) != "2" {
		t.Errorf("reviewed entries %+v", rev)
	}
	for _, task := range r.Tasks {
		if task.ID == "t.review-r3" && (task.Review == nil || task.Review.Approve || task.Review.Reasons[0] != "too clever") {
			t.Errorf("r3's review in status: %+v", task.Review)
		}
	}
}

// TestEngine_ReviewRejectedRunsFixLoop: below the threshold the fix loop runs: the fix gets
// the rejected patch and the reasons, its own work is reviewed, and once approved the task
// succeeds with the fix's product, which the dependent receives.
func TestEngine_ReviewRejectedRunsFixLoop(t *testing.T) {
	exec := newFakeExec(reviewer(map[string]orch.Review{"t.review-r2": {Approve: false, Reasons: []string{"no test"}}}))
	h := start(t, "", exec)
	id := h.runToEnd(parsePlan(t, reviewPlan(3, 2)))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s: %v", r.State, taskStates(r))
	}
	want := map[string]string{"t": "succeeded", "after": "succeeded", "t.review-r1": "succeeded", "t.review-r2": "succeeded",
		"t.review-r3": "succeeded", "t.fix-1": "succeeded", "t.fix-1.review-r1": "succeeded", "t.fix-1.review-r2": "succeeded",
		"t.fix-1.review-r3": "succeeded"}
	if got := taskStates(r); !mapsEqual(got, want) {
		t.Errorf("tasks %v, want %v", got, want)
	}
	byTask := map[string]orch.Attempt{}
	for _, a := range exec.attempts() {
		byTask[a.TaskID] = a
	}
	fix := byTask["t.fix-1"]
	if fix.Subagent != "fixer" || len(fix.Inputs) != 1 || fix.Inputs[0].FromDispatch != byTask["t"].DispatchID || fix.Inputs[0].Select != "patch" {
		t.Errorf("fix attempt %+v, want the fixer given t's patch", fix)
	}
	var in map[string]any
	json.Unmarshal(fix.Input, &in)
	if fmt.Sprint(in["reasons"]) != "[t.review-r2: no test]" || fmt.Sprint(in["attempt"]) != "1" || in["task"] != "t" {
		t.Errorf("fix input %s", fix.Input)
	}
	if got := byTask["t.fix-1.review-r1"].Inputs[0].FromDispatch; got != fix.DispatchID {
		t.Errorf("the fix's reviewer got %s, want the fix's patch %s", got, fix.DispatchID)
	}
	if got := byTask["after"].Inputs[0].FromDispatch; got != fix.DispatchID {
		t.Errorf("after got t's product %s, want the fix's %s", got, fix.DispatchID)
	}
	if tt := r.Tasks[0]; tt.Reason != "" || len(tt.Dispatches) != 1 {
		t.Errorf("t: reason %q, %d attempts", tt.Reason, len(tt.Dispatches))
	}
	var causes []string
	for _, x := range auditAbout(t, h, "run/"+id+"/task/t", "orch.run.extended") {
		causes = append(causes, fmt.Sprint(x.Details["cause"]))
	}
	if !slices.Equal(causes, []string{"review", "fix"}) {
		t.Errorf("t's extensions %v, want review then fix", causes)
	}
}

// TestEngine_FixLoopSpent: every fix rejected: each is `rejected`, the task fails fix-failed
// naming the last reasons, its dependent is skipped, the run fails.
func TestEngine_FixLoopSpent(t *testing.T) {
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		o := orch.Outcome{State: lifecycle.TaskSucceeded}
		if a.Review {
			o.Review = &orch.Review{Approve: false, Reasons: []string{"still wrong in " + a.TaskID}}
		}
		return o
	})
	h := start(t, "", exec)
	id := h.runToEnd(parsePlan(t, reviewPlan(2, 2)))
	r := h.wait(id)
	got := taskStates(r)
	if r.State != lifecycle.RunFailed || got["t"] != "failed" || got["after"] != "skipped" || got["t.fix-1"] != "rejected" || got["t.fix-2"] != "rejected" || got["t.fix-3"] != "" {
		t.Fatalf("run %s: %v", r.State, got)
	}
	tt := r.Tasks[0]
	if tt.Reason != "fix-failed" || !strings.HasPrefix(tt.Detail, "after 2 fixes, the last (t.fix-2) was rejected: t.fix-2.review-r1: still wrong in t.fix-2.review-r1;") {
		t.Errorf("t failed %s: %q", tt.Reason, tt.Detail)
	}
}

// TestEngine_ReviewRejectedWithoutLoop: no fix loop: the task fails naming the reasons; an
// unreadable review counts as a rejection saying why.
func TestEngine_ReviewRejectedWithoutLoop(t *testing.T) {
	bad := orch.InvalidReview(`read review: json: unknown field "Approve"`)
	exec := newFakeExec(reviewer(map[string]orch.Review{"t.review-r1": bad}))
	h := start(t, "", exec)
	r := h.wait(h.runToEnd(parsePlan(t, reviewPlan(3, 0))))
	tt := r.Tasks[0]
	if r.State != lifecycle.RunFailed || tt.State != "failed" || tt.Reason != "review-rejected" ||
		tt.Detail != `t.review-r1: final answer: read review: json: unknown field "Approve"` {
		t.Fatalf("run %s, t %s %s %q", r.State, tt.State, tt.Reason, tt.Detail)
	}
}

// TestEngine_ReviewSurvivesRestart: reviews recorded before a restart count after it.
func TestEngine_ReviewSurvivesRestart(t *testing.T) {
	hold := make(chan struct{})
	first := newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch a.TaskID {
		case "t", "t.review-r1":
			return reviewer(map[string]orch.Review{"t.review-r1": {Approve: false, Reasons: []string{"nope"}}})(a)
		case "t.review-r2":
			return reviewer(nil)(a)
		}
		<-hold
		return orch.Outcome{State: lifecycle.TaskFailed}
	})
	path := filepath.Join(t.TempDir(), "orch.db")
	h := start(t, path, first)
	id := h.submit(parsePlan(t, reviewPlan(2, 0)))
	agoratest.WaitFor(t, 10*time.Second, "both reviews", func() bool {
		r, _ := h.eng.Status(context.Background(), id)
		return stateOf(r, "t.review-r1") == lifecycle.TaskSucceeded && stateOf(r, "t.review-r2") == lifecycle.TaskSucceeded
	})
	h.stop()
	close(hold)
	second := newFakeExec(reviewer(nil)) // r3 approves: 2 of 3, with r2
	h2 := start(t, path, second)
	r := h2.wait(id)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("after the restart: %s %v", r.State, taskStates(r))
	}
	rev := auditAbout(t, h2, "run/"+id+"/task/t", "orch.task.reviewed")
	if len(rev) != 1 || fmt.Sprint(rev[0].Details["approvals"]) != "2" || fmt.Sprint(rev[0].Details["reasons"]) != "[t.review-r1: nope]" {
		t.Errorf("reviewed %+v", rev)
	}
}

// TestEngine_CancelReviewedTask: cancelling a task whose work is under review cancels its
// reviewers.
func TestEngine_CancelReviewedTask(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.Review {
			<-hold
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	id := h.submit(parsePlan(t, reviewPlan(2, 1)))
	agoratest.WaitFor(t, 10*time.Second, "the third review running", func() bool {
		r, _ := h.eng.Status(context.Background(), id)
		return stateOf(r, "t.review-r3") == lifecycle.TaskRunning
	})
	if err := h.eng.Cancel(context.Background(), api.ActionRequest{Run: id, Task: "t", Actor: "t"}); err != nil {
		t.Fatal(err)
	}
	r := h.wait(id)
	got := taskStates(r)
	if r.State != lifecycle.RunFailed || got["t"] != "cancelled" || got["after"] != "skipped" || got["t.review-r1"] != "cancelled" {
		t.Errorf("run %s: %v", r.State, got)
	}
	if got["t.fix-1"] != "" {
		t.Errorf("a cancelled task's review started its fix loop: %v", got)
	}
}

// verifyLoopPlan has a task with a verify gate and a fix loop of two.
const verifyLoopPlan = `version: 1
name: gate
tasks:
  - id: t
    subagent: coder
    verify: {command: [go, test, ./...]}
    on_fail: {fix: {subagent: fixer, max_attempts: 2}}
  - id: after
    subagent: worker
    needs: {work: {from: t, select: patch}}
`

// TestEngine_VerifyRedRunsFixLoop: a red verdict (not retried) adds the fix, which carries
// the task's gate and is given the red patch and what the host saw; its green verdict makes
// the task succeed with the fix's product.
func TestEngine_VerifyRedRunsFixLoop(t *testing.T) {
	red := verdict.Red(verdict.ReasonExit, "exit status 1", 1, []string{"go", "test", "./..."}, time.Second, verdict.TailText{Text: "--- FAIL: TestAdd\nFAIL\n", Total: 23})
	green := verdict.Green([]string{"go", "test", "./..."}, time.Second, verdict.TailText{Text: "ok\n", Total: 3})
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		switch a.TaskID {
		case "t":
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonVerifyFailed, Detail: "verify: exit status 1", Verdict: &red}
		case "t.fix-1":
			if a.Verify == nil || a.Verify.Command[0] != "go" {
				return orch.Outcome{State: lifecycle.TaskFailed, Reason: "worker-failed", Detail: "the fix has no verify gate"}
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded, Verdict: &green}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	id := h.runToEnd(parsePlan(t, verifyLoopPlan))
	r := h.wait(id)
	if r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s: %v", r.State, taskStates(r))
	}
	byTask := map[string]orch.Attempt{}
	n := 0
	for _, a := range exec.attempts() {
		byTask[a.TaskID] = a
		if a.TaskID == "t" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("t ran %d times; a red verdict is never retried", n)
	}
	fix := byTask["t.fix-1"]
	var in struct {
		Reasons []string `json:"reasons"`
	}
	json.Unmarshal(fix.Input, &in)
	if len(in.Reasons) != 2 || in.Reasons[0] != "verify go test ./...: exit status 1" || in.Reasons[1] != "output (the end): --- FAIL: TestAdd\nFAIL\n" {
		t.Errorf("fix reasons %q", in.Reasons)
	}
	if len(fix.Inputs) != 2 || fix.Inputs[0].FromDispatch != byTask["t"].DispatchID || !fix.Inputs[0].Apply || fix.Inputs[0].Key != "patch" {
		t.Fatalf("fix given %+v, want t's red attempt %s applied to its workspace, and its verdict", fix.Inputs, byTask["t"].DispatchID)
	}
	if v := fix.Inputs[1]; v.Key != "verify" || v.Select != "verify" || v.FromDispatch != byTask["t"].DispatchID || v.Apply {
		t.Errorf("fix's verdict input %+v", v)
	}
	if r.Tasks[0].Product != fix.DispatchID || r.Tasks[0].ProductID() != fix.DispatchID {
		t.Errorf("t's product %q, want the fix's dispatch %s", r.Tasks[0].Product, fix.DispatchID)
	}
	if got := byTask["after"].Inputs[0].FromDispatch; got != fix.DispatchID {
		t.Errorf("after got %s, want the fix's product %s", got, fix.DispatchID)
	}
	rej := auditAbout(t, h, "run/"+id+"/task/t", "orch.task.rejected")
	if len(rej) != 1 || rej[0].Details["reason"] != "verify-failed" || rej[0].Details["verdict_reason"] != "exit-status" {
		t.Errorf("rejected entries %+v", rej)
	}
	if n := len(auditAbout(t, h, "run/"+id+"/task/t", "orch.task.verified")); n != 1 {
		t.Errorf("%d verified entries for t, want 1", n)
	}
}
