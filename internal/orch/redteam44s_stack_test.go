package orch_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// A base's approved product is the one its loop accepted, never work its reviewers rejected:
// impl's own work is rejected by its reviewer, impl.fix-1's too (its agent succeeded; only
// the review said no), impl.fix-2's is approved. docs, stacked on impl, starts from
// impl.fix-2's work, and so does its attempt after the engine restarts (the loop's product is
// read back from the database, not kept in memory only). Its own dependent's stack names
// both, in order.
func TestRedTeam44S_StackTakesTheAcceptedFixAfterARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch.db")
	p := parsePlan(t, `version: 1
name: stackfix
tasks:
  - id: impl
    subagent: coder
    review: {subagents: [judge], approve: 1}
    on_fail: {fix: {subagent: fixer, max_attempts: 3}}
  - {id: docs, subagent: coder, base: [impl]}
  - {id: migrate, subagent: coder, base: [docs]}
`)
	release := make(chan struct{})
	var once sync.Once
	decide := func(hold bool) func(a orch.Attempt) orch.Outcome {
		return func(a orch.Attempt) orch.Outcome {
			switch a.TaskID {
			case "impl.review-judge", "impl.fix-1.review-judge":
				return orch.Outcome{State: lifecycle.TaskSucceeded, Review: &orch.Review{Reasons: []string{"no test"}}}
			case "impl.fix-2.review-judge":
				return orch.Outcome{State: lifecycle.TaskSucceeded, Review: &orch.Review{Approve: true, Reasons: []string{}}}
			case "docs":
				if hold {
					<-release // held open while the engine stops
				}
			}
			return orch.Outcome{State: lifecycle.TaskSucceeded}
		}
	}
	first := newFakeExec(decide(true))
	h := start(t, path, first)
	defer once.Do(func() { close(release) })
	id := h.submit(p)
	byTask := func(x *fakeExec) map[string][]orch.Attempt {
		out := map[string][]orch.Attempt{}
		for _, a := range x.attempts() {
			out[a.TaskID] = append(out[a.TaskID], a)
		}
		return out
	}
	for deadline := time.Now().Add(30 * time.Second); len(byTask(first)["docs"]) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("docs never fired: %v", first.attempts())
		}
	}
	at := byTask(first)
	impl, fix1, fix2 := at["impl"][0].DispatchID, at["impl.fix-1"][0].DispatchID, at["impl.fix-2"][0].DispatchID
	if got, want := stackOf(t, at["docs"][0]), []string{"impl=" + fix2}; !slices.Equal(got, want) {
		t.Errorf("docs's stack %q, want impl's accepted fix %q (impl %s, fix-1 %s)", got, want, impl, fix1)
	}
	h.stop()
	once.Do(func() { close(release) })

	second := newFakeExec(decide(false))
	h2 := start(t, path, second)
	if r := h2.wait(id); r.State != lifecycle.RunSucceeded {
		t.Fatalf("run %s: %v", r.State, taskStates(r))
	}
	at2 := byTask(second)
	if len(at2["docs"]) == 0 {
		t.Fatal("docs was not fired again after the restart")
	}
	for _, a := range at2["docs"] {
		if got, want := stackOf(t, a), []string{"impl=" + fix2}; !slices.Equal(got, want) {
			t.Errorf("after the restart docs's stack %q, want impl's accepted fix %q", got, want)
		}
	}
	if len(at2["migrate"]) != 1 {
		t.Fatalf("migrate fired %d times", len(at2["migrate"]))
	}
	if got, want := stackOf(t, at2["migrate"][0]), []string{"impl=" + fix2, "docs=" + at2["docs"][len(at2["docs"])-1].DispatchID}; !slices.Equal(got, want) {
		t.Errorf("migrate's stack %q, want %q", got, want)
	}
	st, err := h2.eng.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range st.Tasks {
		if task.ID == "impl" && task.ProductID() != fix2 {
			t.Errorf("impl's product in its status is %s, want %s", task.ProductID(), fix2)
		}
	}
}

// A client that asks for a new run again and again gets one each time (new_run is no more
// than a new name would give it), and each is recorded with why before anything of it runs;
// a resubmission without new_run, however often, returns the newest, never a new one.
func TestRedTeam44S_NewRunStormIsAudited(t *testing.T) {
	h := start(t, "", newFakeExec(succeed))
	p := mkPlan(t, "storm", 2, spec{ID: "a"})
	co := orch.Checkout{Subagents: map[string]string{"worker": pinA}}
	seen := map[string]bool{}
	var last string
	for i := range 20 {
		s, err := h.eng.SubmitRun(context.Background(), p, orch.Checkout{Subagents: co.Subagents, NewRun: i > 0}, "mcp:storm")
		if err != nil {
			t.Fatal(err)
		}
		if !s.Created || seen[s.RunID] {
			t.Fatalf("submission %d: %+v", i, s)
		}
		if i > 0 && s.Why != "a new run was asked for; run "+last+" has the same plan, subagents and commit" {
			t.Errorf("submission %d says %q", i, s.Why)
		}
		seen[s.RunID], last = true, s.RunID
	}
	for range 20 {
		s, err := h.eng.SubmitRun(context.Background(), p, co, "mcp:storm")
		if err != nil {
			t.Fatal(err)
		}
		if s.Created || s.RunID != last {
			t.Fatalf("a resubmission without new_run: %+v, want run %s", s, last)
		}
	}
	n := 0
	for id := range seen {
		subs := auditOf(t, h, id, "orch.run.submitted")
		if len(subs) != 1 || subs[0].Details["submitted_by"] != "mcp:storm" {
			t.Errorf("run %s's submission entries: %+v", id, subs)
		}
		if subs[0].Details["new_run"] != nil {
			n++
		}
	}
	if n != 19 {
		t.Errorf("%d submission entries say why a new run was made, want 19", n)
	}
}

// orch retry and a stack: a base that failed and is retried gives its dependents the work of
// the attempt that succeeded, never the older one; a succeeded base is never run again
// (retry refuses it), so the work a stacked task was built on cannot change under it; a
// stacked task retried starts from the same bases' work.
func TestRedTeam44S_RetryAndTheStack(t *testing.T) {
	var mu sync.Mutex
	fails := map[string]int{"a": 1, "b": 1} // each fails its first attempt
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		mu.Lock()
		defer mu.Unlock()
		if fails[a.TaskID] > 0 {
			fails[a.TaskID]--
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "worker-failed", Detail: "exit status 1"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	p := parsePlan(t, "version: 1\nname: retry\ntasks:\n  - {id: a, subagent: s, retry: {max_attempts: 1}}\n  - {id: b, subagent: s, base: [a], retry: {max_attempts: 1}}\n")
	id := h.submit(p)
	if r := h.wait(id); r.State != lifecycle.RunFailed || taskStates(r)["b"] != lifecycle.TaskSkipped {
		t.Fatalf("run %s: %v", r.State, taskStates(r))
	}
	retry := func(task string) error {
		return h.eng.Retry(context.Background(), api.ActionRequest{Run: id, Task: task, Actor: "tester"})
	}
	if err := retry("a"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait(id); r.State != lifecycle.RunFailed || taskStates(r)["a"] != lifecycle.TaskSucceeded || taskStates(r)["b"] != lifecycle.TaskFailed {
		t.Fatalf("after retrying a: %s %v", r.State, taskStates(r))
	}
	var as, bs []orch.Attempt
	for _, x := range exec.attempts() {
		switch x.TaskID {
		case "a":
			as = append(as, x)
		case "b":
			bs = append(bs, x)
		}
	}
	if len(as) != 2 || len(bs) != 1 || !slices.Equal(stackOf(t, bs[0]), []string{"a=" + as[1].DispatchID}) {
		t.Fatalf("a's attempts %d, b's %d, b's stack %q; want a's second attempt %s", len(as), len(bs), stackOf(t, bs[0]), as[1].DispatchID)
	}
	if err := retry("a"); err == nil || !strings.Contains(err.Error(), "only a failed or cancelled task can be retried") {
		t.Errorf("retry of a succeeded base: %v", err)
	}
	if err := retry("b"); err != nil {
		t.Fatal(err)
	}
	if r := h.wait(id); r.State != lifecycle.RunSucceeded {
		t.Fatalf("after retrying b: %s %v", r.State, taskStates(r))
	}
	var last orch.Attempt
	for _, x := range exec.attempts() {
		if x.TaskID == "b" {
			last = x
		}
	}
	if got := stackOf(t, last); !slices.Equal(got, []string{"a=" + as[1].DispatchID}) {
		t.Errorf("b's retry's stack %q, want a's succeeded attempt %s", got, as[1].DispatchID)
	}
}
