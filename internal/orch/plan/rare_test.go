package plan_test

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// rarePlan has a task that sets every field of a TaskRare, tasks that set one each, and a
// task that sets none.
const rarePlan = `version: 1
name: rare
tasks:
  - {id: up, subagent: s, verify: {command: [make, check]}}
  - id: all
    subagent: s
    retry: {max_attempts: 3}
    timeout: 5m
    base: [up]
    needs: {v: {from: up, select: verify}}
    grants: {tools: [list_files]}
    budget: {usd: 1}
    verify: {command: [go, test, ./...]}
    review: {subagents: [r1], approve: 1}
    on_fail: {fix: {subagent: fixer, max_attempts: 2}}
  - {id: plain, subagent: s, depends_on: [all]}
  - {id: timed, subagent: s, timeout: 1m}
  - {id: learner, subagent: s, learn: true}
  - {id: each, fan_out: {from: plain, select: "output:items.json", template: {subagent: w, budget: {tokens: 10}}}}
`

// TestTask_RareRoundTrip: a task with rare fields and one without parse to what their
// canonical form parses back to, the task without keeps no TaskRare, and the one with keeps
// each field where its method reads it.
func TestTask_RareRoundTrip(t *testing.T) {
	p := mustParse(t, rarePlan)
	back, err := plan.Parse("c.json", p.Canonical())
	if err != nil {
		t.Fatalf("canonical form does not parse: %v", err)
	}
	if diff := cmp.Diff(p, back, ignorePos); diff != "" {
		t.Errorf("round trip (-yaml +canonical):\n%s", diff)
	}
	if back.Digest() != p.Digest() {
		t.Errorf("digest %s, back %s", p.Digest(), back.Digest())
	}
	byID := map[string]*plan.Task{}
	for i := range p.Tasks {
		byID[p.Tasks[i].ID] = &p.Tasks[i]
	}
	if r := byID["plain"].Rare; r != nil {
		t.Errorf("plain keeps a TaskRare %+v; want none", r)
	}
	all := byID["all"]
	if all.Retry().MaxAttempts != 3 || all.Timeout() != 5*time.Minute || len(all.Base()) != 1 || all.Needs()["v"].From != "up" ||
		len(all.Grants().Tools) != 1 || all.Budget() != (budget.Budget{USD: 1}) || all.Verify() == nil ||
		all.Review().Approve != 1 || all.OnFail().Fix.MaxAttempts != 2 || all.Learn() || all.FanOut() != nil {
		t.Errorf("all: %+v", all.Rare)
	}
	if timed := byID["timed"]; timed.Timeout() != time.Minute || timed.Retry() != nil || timed.Needs() != nil {
		t.Errorf("timed: %+v", timed.Rare)
	}
	if !byID["learner"].Learn() {
		t.Error("learner is not a learn task")
	}
	if fo := byID["each"].FanOut(); fo == nil || fo.Template.Budget() != (budget.Budget{Tokens: 10}) || fo.Template.Subagent != "w" {
		t.Errorf("each: %+v", byID["each"].Rare)
	}
}

// TestTask_HandBuiltWithoutRare: a Task built without a TaskRare reads as one that sets none
// of its fields, and a plan of such tasks resolves, writes and checks without a panic.
func TestTask_HandBuiltWithoutRare(t *testing.T) {
	p := &plan.Plan{Version: 1, Name: "hand", Concurrency: 1, Tasks: []plan.Task{
		{ID: "a", Subagent: "s"},
		{ID: "b", Subagent: "s", DependsOn: []string{"a"}},
	}}
	task := &p.Tasks[0]
	if task.Retry() != nil || task.Timeout() != 0 || task.Learn() || task.Base() != nil || task.Needs() != nil ||
		task.Grants() != nil || !task.Budget().IsZero() || task.Verify() != nil || task.FanOut() != nil ||
		task.Review() != nil || task.OnFail() != nil {
		t.Errorf("a task without a TaskRare reads %+v", task)
	}
	rs := p.Resolve()
	if len(rs) != 2 || rs[1].Deps[0] != "a" || rs[0].Rare != plan.NoRare || rs[0].Retry == nil {
		t.Errorf("resolved %+v", rs)
	}
	back, err := plan.Parse("c.json", p.Canonical())
	if err != nil {
		t.Fatalf("canonical form does not parse: %v", err)
	}
	if diff := cmp.Diff(p, back, ignorePos); diff != "" {
		t.Errorf("round trip (-hand +canonical):\n%s", diff)
	}
	if refs := p.SubagentRefs(); len(refs) != 1 || refs[0] != "s" {
		t.Errorf("subagent refs %v", refs)
	}
	_ = p.LearnTasks()
	_ = p.GateWarnings(nil)
	if err := p.Check(context.Background(), nil); err != nil {
		t.Errorf("check: %v", err)
	}
}

// TestTask_Size: a plan holds one Task per task while its documents are alive (the parse's
// peak live heap, BenchmarkParse100k), so the fields few tasks set stay behind TaskRare.
func TestTask_Size(t *testing.T) {
	if n := unsafe.Sizeof(plan.Task{}); n > 152 {
		t.Errorf("a Task is %d bytes; at most 152: put a field few tasks set in TaskRare", n)
	}
}
