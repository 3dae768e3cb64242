package orch_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

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
				return orch.Outcome{State: api.TaskSucceeded, Review: &orch.Review{Reasons: []string{"no test"}}}
			case "impl.fix-2.review-judge":
				return orch.Outcome{State: api.TaskSucceeded, Review: &orch.Review{Approve: true, Reasons: []string{}}}
			case "docs":
				if hold {
					<-release // held open while the engine stops
				}
			}
			return orch.Outcome{State: api.TaskSucceeded}
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
	if r := h2.wait(id); r.State != api.RunSucceeded {
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
