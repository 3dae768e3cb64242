package orch_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// stackOf is an attempt's Stack inputs as "dir=from_dispatch", in order, and whether each
// is a patch under plan.StackKey.
func stackOf(t *testing.T, a orch.Attempt) []string {
	t.Helper()
	var out []string
	for _, in := range a.Inputs {
		if !in.Stack {
			continue
		}
		if in.Key != plan.StackKey || in.Select != plan.SelectPatch || in.FromTask != in.Dir {
			t.Errorf("attempt %s: stack input %+v", a.TaskID, in)
		}
		out = append(out, in.Dir+"="+in.FromDispatch)
	}
	return out
}

// A stacked task's attempts carry its stack: each base's approved product (after a fix loop,
// the fix's), a base's own bases first, once each. A stacked task's fix has the same stack
// (and the rejected work to apply), as have its reviewers.
func TestEngine_StackInputs(t *testing.T) {
	p, err := plan.Parse("stack.yaml", []byte(`version: 1
name: stack
tasks:
  - {id: impl, subagent: worker}
  - {id: other, subagent: worker}
  - {id: docs, subagent: worker, base: [impl], verify: {command: [make]}, on_fail: {fix: {subagent: fixer}}}
  - {id: migrate, subagent: worker, base: [docs, other, impl], review: {subagents: [judge], approve: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "docs" {
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: lifecycle.ReasonVerifyFailed, Detail: "red"}
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, "", exec)
	r := h.wait(h.submit(p))
	by := map[string]orch.Attempt{}
	for _, a := range exec.attempts() {
		by[a.TaskID] = a
	}
	impl, other, docsFix := by["impl"].DispatchID, by["other"].DispatchID, by["docs.fix-1"].DispatchID
	for _, tt := range []struct {
		task string
		want []string
	}{
		{"impl", nil},
		{"docs", []string{"impl=" + impl}},
		{"docs.fix-1", []string{"impl=" + impl}},
		// docs's approved product is its fix's; impl, reached twice, comes once, first.
		{"migrate", []string{"impl=" + impl, "docs=" + docsFix, "other=" + other}},
		{"migrate.review-judge", []string{"impl=" + impl, "docs=" + docsFix, "other=" + other}},
	} {
		a, ok := by[tt.task]
		if !ok {
			t.Errorf("task %s never fired", tt.task)
			continue
		}
		if got := stackOf(t, a); !slices.Equal(got, tt.want) {
			t.Errorf("%s's stack = %q, want %q", tt.task, got, tt.want)
		}
	}
	// The fix still applies the rejected work on top of its stack.
	applied := false
	for _, in := range by["docs.fix-1"].Inputs {
		applied = applied || (in.Apply && in.FromDispatch == by["docs"].DispatchID)
	}
	if !applied {
		t.Errorf("docs.fix-1's inputs %+v lack the rejected work to apply", by["docs.fix-1"].Inputs)
	}
	st, err := h.eng.Status(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range st.Tasks {
		if task.ID == "migrate" && (!slices.Equal(task.Base, []string{"docs", "other", "impl"}) || !slices.Equal(task.DependsOn, []string{"docs", "impl", "other"})) {
			t.Errorf("migrate in status: base %q, depends_on %q", task.Base, task.DependsOn)
		}
	}
	fired, err := audit.List(context.Background(), h.db.SQL(), audit.ListOptions{Kind: "orch.task.fired"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range fired {
		if e.Subject != "run/"+r.ID+"/task/migrate" {
			continue
		}
		n++
		if ins, _ := e.Details["inputs"].([]any); len(ins) != 3 || ins[0].(map[string]any)["stack"] != true || ins[0].(map[string]any)["dir"] != "impl" {
			t.Errorf("migrate's fired entry inputs: %v", e.Details["inputs"])
		}
	}
	if n != 1 {
		t.Errorf("%d orch.task.fired entries of migrate, want 1", n)
	}
}

const (
	pinA = "worker@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	pinB = "worker@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// A run's identity holds its pins: the same pins return the run, changed ones make a new run
// that says why, NewRun makes one all the same; every attempt dispatches the pinned version,
// after a restart too.
func TestEngine_SubmitPins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch.db")
	release := make(chan struct{})
	first := newFakeExec(func(a orch.Attempt) orch.Outcome {
		if a.TaskID == "a" {
			<-release // held open while the engine stops
		}
		return orch.Outcome{State: lifecycle.TaskSucceeded}
	})
	h := start(t, path, first)
	p := mkPlan(t, "pins", 2, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}})
	submit := func(h *harness, co orch.Checkout) orch.Submission {
		t.Helper()
		s, err := h.eng.SubmitRun(context.Background(), p, co, "tester")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1 := submit(h, orch.Checkout{Subagents: map[string]string{"worker": pinA}})
	if !s1.Created || s1.Why != "" {
		t.Fatalf("first: %+v", s1)
	}
	for deadline := time.Now().Add(10 * time.Second); len(first.attempts()) == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a never fired")
		}
	}
	if got := first.attempts()[0].Subagent; got != pinA {
		t.Errorf("a dispatched %q, want the pinned %q", got, pinA)
	}
	if again := submit(h, orch.Checkout{Subagents: map[string]string{"worker": pinA}}); again.Created || again.RunID != s1.RunID {
		t.Errorf("the same pins: %+v, want run %s", again, s1.RunID)
	}
	h.stop()
	close(release)

	second := newFakeExec(succeed)
	h2 := start(t, path, second)
	h2.wait(s1.RunID)
	for _, a := range second.attempts() {
		if a.RunID == s1.RunID && a.Subagent != pinA {
			t.Errorf("after the restart %s dispatched %q, want the pinned %q", a.TaskID, a.Subagent, pinA)
		}
	}
	if again := submit(h2, orch.Checkout{Subagents: map[string]string{"worker": pinA}}); again.Created || again.RunID != s1.RunID {
		t.Errorf("the same pins after a restart: %+v, want run %s", again, s1.RunID)
	}
	s2 := submit(h2, orch.Checkout{Subagents: map[string]string{"worker": pinB}})
	want := fmt.Sprintf("subagent versions changed since run %s: worker was %s, is %s", s1.RunID, pinA, pinB)
	if !s2.Created || s2.RunID == s1.RunID || s2.Why != want {
		t.Errorf("changed pins: %+v, want a new run saying %q", s2, want)
	}
	h2.wait(s2.RunID)
	s3 := submit(h2, orch.Checkout{Subagents: map[string]string{"worker": pinB}, NewRun: true})
	if !s3.Created || s3.RunID == s2.RunID || s3.Why != "a new run was asked for; run "+s2.RunID+" has the same plan, subagents and commit" {
		t.Errorf("NewRun: %+v", s3)
	}
	h2.wait(s3.RunID)
	// The newest run of the identity is the one returned.
	if again := submit(h2, orch.Checkout{Subagents: map[string]string{"worker": pinB}}); again.Created || again.RunID != s3.RunID {
		t.Errorf("after NewRun: %+v, want the newest run %s", again, s3.RunID)
	}
	subs := auditOf(t, h2, s2.RunID, "orch.run.submitted")
	if len(subs) != 1 || subs[0].Details["new_run"] != want || subs[0].Details["subagents"].(map[string]any)["worker"] != pinB {
		t.Errorf("the second run's submission entry: %+v", subs)
	}
	if subs := auditOf(t, h2, s1.RunID, "orch.run.submitted"); len(subs) != 1 || subs[0].Details["new_run"] != nil {
		t.Errorf("the first run's submission entry: %+v", subs)
	}
}
