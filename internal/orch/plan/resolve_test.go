package plan_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/plan"
)

func TestPlan_Resolve(t *testing.T) {
	p := mustParse(t, fullPlan+`  - id: last
    subagent: s
    depends_on: [test, lint]
    needs: {a: {from: lint, select: patch}, b: {from: docs, select: outputs}}
    locks: [b, {name: a, mode: shared}, b]
    retry: {max_backoff: 30s}
`)
	yes, no := true, false
	want := []plan.Resolved{
		{
			ID: "lint", Subagent: "fixer", Target: "local", Env: []string{"base"},
			Input: json.RawMessage(`{"budget":3,"files":["a.go","b.go"],"goal":"fix lint","none":null,"strict":true}`),
			Deps:  []string{},
			Locks: []plan.Lock{{Name: "cache", Mode: "exclusive"}, {Name: "db", Mode: "shared"}, {Name: "repo", Mode: "exclusive"}},
			// defaults.retry over the built-in policy
			Retry:   &plan.Retry{MaxAttempts: 3, InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 2, OnWorkerFailed: &yes},
			Timeout: 10 * time.Minute,
			Rare:    plan.NoRare,
		},
		{
			ID: "test", Subagent: "fixer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			Target: "big", Env: []string{"base", "extra"}, Deps: []string{"lint"},
			Rare: &plan.Rare{Needs: map[string]plan.Need{
				"fixes":  {From: "lint", Select: "patch"},
				"report": {From: "lint", Select: "output:reports/lint.txt"},
				"all":    {From: "lint", Select: "outputs"},
			}},
			// the task's retry over defaults.retry, field by field
			Retry:   &plan.Retry{MaxAttempts: 5, InitialBackoff: 2 * time.Second, MaxBackoff: time.Minute, Multiplier: 1.5, OnWorkerFailed: &no},
			Timeout: 15 * time.Minute,
		},
		{
			ID: "docs", Subagent: "writer", Target: "local", Env: []string{}, Deps: []string{},
			Retry:   &plan.Retry{MaxAttempts: 3, InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute, Multiplier: 2, OnWorkerFailed: &yes},
			Timeout: 10 * time.Minute,
			Rare:    plan.NoRare,
		},
		{
			ID: "last", Subagent: "s", Target: "local", Env: []string{"base"},
			Deps:  []string{"docs", "lint", "test"},
			Rare:  &plan.Rare{Needs: map[string]plan.Need{"a": {From: "lint", Select: "patch"}, "b": {From: "docs", Select: "outputs"}}},
			Locks: []plan.Lock{{Name: "a", Mode: "shared"}, {Name: "b", Mode: "exclusive"}},
			Retry: &plan.Retry{MaxAttempts: 3, InitialBackoff: 2 * time.Second, MaxBackoff: 30 * time.Second, Multiplier: 2, OnWorkerFailed: &yes},

			Timeout: 10 * time.Minute,
		},
	}
	if diff := cmp.Diff(want, p.Resolve()); diff != "" {
		t.Errorf("Resolve (-want +got):\n%s", diff)
	}
}

func TestPlan_Resolve_NoDefaults(t *testing.T) {
	p := mustParse(t, "version: 1\nname: p\ntasks: [{id: a, subagent: s}]")
	want := []plan.Resolved{{ID: "a", Subagent: "s", Env: []string{}, Deps: []string{}, Retry: ptr(plan.DefaultRetry()), Rare: plan.NoRare}}
	if diff := cmp.Diff(want, p.Resolve()); diff != "" {
		t.Errorf("Resolve (-want +got):\n%s", diff)
	}
	if r := plan.DefaultRetry(); r.MaxAttempts != 1 || r.InitialBackoff != 5*time.Second || r.Multiplier != 2 || r.MaxBackoff != 5*time.Minute || !*r.OnWorkerFailed {
		t.Errorf("DefaultRetry = %+v, want 1 attempt, 5s x2 up to 5m, worker-failed retried", r)
	}
}

// TestPlan_Resolve_LockModes covers a plan built by hand: Parse refuses a lock in two modes,
// but Resolve still keeps the stronger one.
func TestPlan_Resolve_LockModes(t *testing.T) {
	p := &plan.Plan{Version: 1, Name: "p", Concurrency: 1, Tasks: []plan.Task{{
		ID: "a", Subagent: "s",
		Locks: []plan.Lock{{Name: "z", Mode: "shared"}, {Name: "m", Mode: "shared"}, {Name: "z", Mode: "exclusive"}, {Name: "m", Mode: "shared"}},
	}}}
	want := []plan.Lock{{Name: "m", Mode: "shared"}, {Name: "z", Mode: "exclusive"}}
	if diff := cmp.Diff(want, p.Resolve()[0].Locks); diff != "" {
		t.Errorf("Resolve locks (-want +got):\n%s", diff)
	}
}

// TestPlan_Resolve_Copies checks that changing a resolved task leaves the plan alone.
func TestPlan_Resolve_Copies(t *testing.T) {
	p := mustParse(t, fullPlan)
	r := p.Resolve()
	r[0].Env[0] = "changed"
	r[1].Needs["fixes"] = plan.Need{}
	r[0].Locks[0].Name = "changed"
	*r[0].Retry.OnWorkerFailed = false
	if diff := cmp.Diff(mustParse(t, fullPlan), p, ignorePos); diff != "" {
		t.Errorf("plan changed through Resolve's result:\n%s", diff)
	}
	if again := p.Resolve(); !*again[0].Retry.OnWorkerFailed {
		t.Errorf("a later Resolve sees the change to an earlier result")
	}
}

func ptr[T any](v T) *T { return &v }

// TestPlan_Resolve_ListsEndAtTheirLength: the resolved tasks' deps and locks are cut from one
// array each; each list is capped at its length, so an append to one task's list makes a
// copy and never writes into the next task's.
func TestPlan_Resolve_ListsEndAtTheirLength(t *testing.T) {
	p := mustParse(t, `version: 1
name: p
tasks:
  - {id: a, subagent: s, locks: [{name: x}]}
  - {id: b, subagent: s, depends_on: [a], locks: [{name: y}]}
  - {id: c, subagent: s, depends_on: [a, b], locks: [{name: z}]}
`)
	r := p.Resolve()
	for i := range r {
		if len(r[i].Deps) != cap(r[i].Deps) || len(r[i].Locks) != cap(r[i].Locks) {
			t.Errorf("%s: deps len %d cap %d, locks len %d cap %d: want each capped at its length",
				r[i].ID, len(r[i].Deps), cap(r[i].Deps), len(r[i].Locks), cap(r[i].Locks))
		}
	}
	_ = append(r[0].Deps, "forged")
	_ = append(r[1].Deps, "forged")
	_ = append(r[0].Locks, plan.Lock{Name: "forged"})
	_ = append(r[1].Locks, plan.Lock{Name: "forged"})
	if diff := cmp.Diff([]string{"a"}, r[1].Deps); diff != "" {
		t.Errorf("b's deps after appends to a's (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, r[2].Deps); diff != "" {
		t.Errorf("c's deps after appends to b's (-want +got):\n%s", diff)
	}
	if r[1].Locks[0].Name != "y" || r[2].Locks[0].Name != "z" {
		t.Errorf("locks after appends to earlier tasks': b %v, c %v", r[1].Locks, r[2].Locks)
	}
}
