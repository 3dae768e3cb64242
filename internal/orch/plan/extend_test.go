package plan_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// extendPlan uses every run-extension key: a fan-out whose template has a review and a fix
// loop, a reduce that needs the fan-out, and a task with its own review and fix loop.
const extendPlan = `version: 1
name: overnight
defaults: {timeout: 20m, env: [base]}
tasks:
  - id: split
    subagent: splitter
  - id: each
    fan_out:
      from: split
      select: "output:items.json"
      template:
        subagent: worker
        input: {goal: port the package}
        locks: [{name: ci, mode: shared}]
        timeout: 5m
        review: {subagents: [r1, r2], approve: 1}
        on_fail: {fix: {subagent: fixer, max_attempts: 2}}
  - id: reduce
    subagent: reducer
    needs:
      parts: {from: each, select: outputs}
  - id: docs
    subagent: writer
    review: {subagents: [r1, r2, "r3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"], approve: 2}
    on_fail: {fix: {subagent: fixer}}
`

func TestParse_Extension(t *testing.T) {
	p := mustParse(t, extendPlan)
	byID := map[string]plan.Resolved{}
	for _, r := range p.Resolve() {
		byID[r.ID] = r
	}
	each := byID["each"]
	if each.FanOut == nil || each.Subagent != "" {
		t.Fatalf("each: %+v, want a fan-out with no subagent of its own", each)
	}
	if !slices.Equal(each.Deps, []string{"split"}) {
		t.Errorf("each depends on %v, want [split]", each.Deps)
	}
	tmpl := each.FanOut.Template
	if tmpl.ID != "" || tmpl.Subagent != "worker" || tmpl.Timeout.String() != "5m0s" || !slices.Equal(tmpl.Env, []string{"base"}) {
		t.Errorf("template resolved to %+v; want worker, its own 5m timeout and defaults.env", tmpl)
	}
	if tmpl.Review == nil || tmpl.Review.Approve != 1 || tmpl.OnFail == nil || tmpl.OnFail.Fix.MaxAttempts != 2 {
		t.Errorf("template review %+v, on_fail %+v", tmpl.Review, tmpl.OnFail)
	}
	docs := byID["docs"]
	if docs.Review == nil || docs.Review.Approve != 2 || len(docs.Review.Subagents) != 3 {
		t.Errorf("docs review %+v", docs.Review)
	}
	if docs.OnFail == nil || docs.OnFail.Fix.Subagent != "fixer" || docs.OnFail.Fix.MaxAttempts != 1 {
		t.Errorf("docs on_fail %+v, want fixer with the default of 1 attempt", docs.OnFail)
	}
	if !slices.Equal(byID["reduce"].Deps, []string{"each"}) {
		t.Errorf("reduce depends on %v", byID["reduce"].Deps)
	}
	// Canonical form: parses back to the same bytes.
	c := p.Canonical()
	again := mustParse(t, string(c))
	if got := string(again.Canonical()); got != string(c) {
		t.Errorf("canonical form does not read back the same:\n got %s\nwant %s", got, c)
	}
	if !strings.Contains(string(c), `{"fan_out":{"from":"split","select":"output:items.json","template":{"input":{"goal":"port the package"},"locks":[{"mode":"shared","name":"ci"}],"on_fail":{"fix":{"max_attempts":2,"subagent":"fixer"}},"review":{"approve":1,"subagents":["r1","r2"]},"subagent":"worker","timeout":"5m0s"}},"id":"each"}`) {
		t.Errorf("canonical fan-out task not as expected:\n%s", c)
	}
}

// TestParse_ExtensionErrors: each mistake is reported at its path, all at once.
func TestParse_ExtensionErrors(t *testing.T) {
	const head = "version: 1\nname: p\ntasks:\n  - {id: split, subagent: s}\n"
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"fan-out task with its own settings", head + "  - {id: f, subagent: s, timeout: 1m, fan_out: {from: split, select: 'output:i.json', template: {subagent: w}}}", []string{
			"p.yaml:5: tasks[1].subagent: a fan_out task runs nothing itself: move subagent into fan_out.template",
			"p.yaml:5: tasks[1].timeout: a fan_out task runs nothing itself: move timeout into fan_out.template",
		}},
		{"fan-out without select or template", head + "  - {id: f, fan_out: {from: split}}", []string{
			`p.yaml:5: tasks[1].fan_out.select: required; want output:PATH, the file of the list in "split"'s outputs`,
			"p.yaml:5: tasks[1].fan_out.template: required; the settings of every item's task: {subagent, input, ...}",
		}},
		{"fan-out selecting a patch", head + "  - {id: f, fan_out: {from: split, select: patch, template: {subagent: w}}}", []string{
			`p.yaml:5: tasks[1].fan_out.select: want output:PATH (a JSON list in the producer's outputs), got "patch"`,
		}},
		{"fan-out from an unknown task, template without subagent", head + "  - {id: f, fan_out: {from: nope, select: 'output:x', template: {input: {}}}}", []string{
			`p.yaml:5: tasks[1].fan_out.from: unknown task "nope"`,
			"p.yaml:5: tasks[1].fan_out.template.subagent: required",
		}},
		{"nested fan-out", head + "  - {id: f, fan_out: {from: split, select: 'output:x', template: {subagent: w, fan_out: {}}}}", []string{
			`p.yaml:5: tasks[1].fan_out.template.fan_out: unknown field "fan_out"; known fields: base, budget, depends_on, env, grants, input, locks, needs, on_fail, retry, review, subagent, target, timeout, verify`,
		}},
		{"fan-out from a fan-out", head + "  - {id: f, fan_out: {from: split, select: 'output:x', template: {subagent: w}}}\n  - {id: g, fan_out: {from: f, select: 'output:x', template: {subagent: w}}}", []string{
			`p.yaml:6: tasks[2].fan_out.from: task "f" is a fan_out task and leaves no list: name the task that writes it`,
		}},
		{"cycle through a template", head + "  - {id: f, fan_out: {from: split, select: 'output:x', template: {subagent: w, needs: {x: {from: late, select: patch}}}}}\n  - {id: late, subagent: s, depends_on: [f]}", []string{
			"p.yaml:5: tasks[1].fan_out.template.needs.x.from: cycle: f -> late -> f",
		}},
		{"template input with item, producer with a review", "version: 1\nname: p\ntasks:\n  - {id: split, subagent: s, review: {subagents: [r], approve: 1}}\n  - {id: f, fan_out: {from: split, select: 'output:x', template: {subagent: w, input: {item: 1}}}}", []string{
			`p.yaml:5: tasks[1].fan_out.from: task "split" has a review or on_fail: a fan-out's list is read when its producer's attempt ends, so its producer cannot wait for a judgment`,
			"p.yaml:5: tasks[1].fan_out.template.input.item: set by the fan-out: each item's task gets its item here",
		}},
		{"a verdict from a task without a gate", head + "  - {id: a, subagent: s, needs: {v: {from: split, select: verify}}}\n  - {id: b, subagent: s, verify: {command: [make]}}\n  - {id: c, subagent: s, needs: {v: {from: b, select: verify}}}", []string{
			`p.yaml:5: tasks[1].needs.v.select: task "split" has no verify gate, so no verdict to hand over`,
		}},
		{"review limits", head + "  - {id: a, subagent: s, review: {subagents: [r1, r2, r3, r4, r5, r6, r7, r8, r9, r10], approve: 0}}\n  - {id: b, subagent: s, review: {subagents: []}}", []string{
			"p.yaml:5: tasks[1].review.subagents: 10 reviewers; at most 9",
			"p.yaml:5: tasks[1].review.approve: want 1 to 10 (the number of reviewers), got 0",
			"p.yaml:6: tasks[2].review.subagents: required; 1 to 9 reviewer subagents",
			"p.yaml:6: tasks[2].review.approve: required; how many of the 0 reviewers must approve",
		}},
		{"review duplicates and an unreachable threshold", head + "  - {id: a, subagent: s, review: {subagents: [r1, 'r1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', 'R2'], approve: 4}}", []string{
			`p.yaml:5: tasks[1].review.subagents[1]: reviewer "r1" listed twice (first at subagents[0]): each reviewer's task is named for it`,
			`p.yaml:5: tasks[1].review.subagents[2]: invalid subagent name "R2": use 1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit`,
			"p.yaml:5: tasks[1].review.approve: want 1 to 3 (the number of reviewers), got 4",
		}},
		{"on_fail without a gate, without fix, over the bound", head + "  - {id: a, subagent: s, on_fail: {fix: {subagent: f}}}\n  - {id: b, subagent: s, review: {subagents: [r], approve: 1}, on_fail: {}}\n  - {id: c, subagent: s, review: {subagents: [r], approve: 1}, on_fail: {fix: {max_attempts: 11}}}", []string{
			"p.yaml:5: tasks[1].on_fail: a fix loop needs a gate that can be red: give the task a verify gate or a review",
			"p.yaml:6: tasks[2].on_fail.fix: required; {subagent: FIXER, max_attempts: N}",
			"p.yaml:7: tasks[3].on_fail.fix.subagent: required; the subagent that fixes red work",
			"p.yaml:7: tasks[3].on_fail.fix.max_attempts: want 1 to 10, got 11",
		}},
		{"declared ids cannot take an added task's form", head + "  - {id: 'split.fix-1', subagent: s}\n  - {id: 'split[0]', subagent: s}\n  - {id: 'x.review-r1', subagent: s}", []string{
			`p.yaml:5: tasks[1].id: invalid task id "split.fix-1": use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit`,
			`p.yaml:6: tasks[2].id: invalid task id "split[0]": use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit`,
			`p.yaml:7: tasks[3].id: invalid task id "x.review-r1": use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseErrs(t, tt.src)); diff != "" {
				t.Errorf("Parse errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlan_Check_Extension: the subagents a fan-out template, a review and a fix loop name are
// catalog references, looked up with the others.
func TestPlan_Check_Extension(t *testing.T) {
	p := mustParse(t, extendPlan)
	refs := &fakeRefs{subagents: []string{"splitter", "worker", "reducer", "writer", "r1", "r2"}, envs: []string{"base"}}
	err := p.Check(t.Context(), refs)
	want := []string{
		`p.yaml:17: tasks[1].fan_out.template.on_fail.fix.subagent: subagent "fixer" not found; known: splitter, worker, reducer, writer, r1, r2`,
		`p.yaml:24: tasks[3].review.subagents[2]: subagent "r3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" not found; known: splitter, worker, reducer, writer, r1, r2`,
		`p.yaml:25: tasks[3].on_fail.fix.subagent: subagent "fixer" not found; known: splitter, worker, reducer, writer, r1, r2`,
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSpace(errString(err)), "\n")); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestJSONSchema_Extension: a plan a model writes from the published schema alone, with
// fan_out, review and on_fail, passes the schema and parses; the schema refuses a task with
// neither subagent nor fan_out, and a fan-out template without its subagent.
func TestJSONSchema_Extension(t *testing.T) {
	r, err := plan.JSONSchema().Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	const written = `{"version":1,"name":"port-all","tasks":[
		{"id":"split","subagent":"splitter"},
		{"id":"port","fan_out":{"from":"split","select":"output:packages.json","template":{"subagent":"porter","input":{"style":"small commits"},
			"locks":[{"name":"ci","mode":"shared"}],"review":{"subagents":["r1","r2","r3"],"approve":2},"on_fail":{"fix":{"subagent":"fixer","max_attempts":2}}}}},
		{"id":"summary","subagent":"writer","needs":{"parts":{"from":"port","select":"outputs"}},
			"review":{"subagents":["r1"],"approve":1},"on_fail":{"fix":{"subagent":"fixer"}}}]}`
	var v any
	if err := json.Unmarshal([]byte(written), &v); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(v); err != nil {
		t.Fatalf("a plan written to the schema fails it: %v", err)
	}
	p, err := plan.Parse("written.json", []byte(written))
	if err != nil {
		t.Fatalf("a plan written to the schema does not parse: %v", err)
	}
	var canon any
	json.Unmarshal(p.Canonical(), &canon)
	if err := r.Validate(canon); err != nil {
		t.Errorf("the canonical form fails the schema: %v", err)
	}
	for _, bad := range []string{
		`{"version":1,"name":"x","tasks":[{"id":"a"}]}`,
		`{"version":1,"name":"x","tasks":[{"id":"s","subagent":"s"},{"id":"a","fan_out":{"from":"s","select":"output:x","template":{"input":{}}}}]}`,
		`{"version":1,"name":"x","tasks":[{"id":"a","subagent":"s","review":{"subagents":["r"]}}]}`,
		`{"version":1,"name":"x","tasks":[{"id":"a","subagent":"s","fan_out":{"from":"s","select":"output:x","template":{"subagent":"w"}}}]}`,
	} {
		var v any
		json.Unmarshal([]byte(bad), &v)
		if err := r.Validate(v); err == nil {
			t.Errorf("the schema accepts %s", bad)
		}
		if _, err := plan.Parse("bad.json", []byte(bad)); err == nil {
			t.Errorf("the decoder accepts %s", bad)
		}
	}
}

// TestIDs: the ids of added tasks are valid ids of their own form and never a declared id.
func TestIDs(t *testing.T) {
	added := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*((\[[a-z0-9][a-z0-9_-]*\])|(\.fix-[0-9]+)|(\.review-[a-z0-9][a-z0-9._-]*))+$`)
	for _, id := range []string{plan.ItemID("each", "pkg-1"), plan.FixID("docs", 2), plan.ReviewID("docs", "r3@sha256:00"),
		plan.ReviewID(plan.FixID(plan.ItemID("each", "7"), 1), "r1")} {
		if !added.MatchString(id) {
			t.Errorf("added id %q is not of the added form", id)
		}
		if _, err := plan.Parse("p.yaml", []byte("version: 1\nname: p\ntasks: [{id: '"+id+"', subagent: s}]")); err == nil {
			t.Errorf("a plan may declare the added id %q", id)
		}
	}
	if got := plan.ReviewID("docs", "r3@sha256:00"); got != "docs.review-r3" {
		t.Errorf("ReviewID = %q, want docs.review-r3", got)
	}
	for _, k := range []string{"../x", "a].fix-1", "A", "", "a.b", "a/b", "a[0]", strings.Repeat("a", 64)} {
		if plan.ValidItemKey(k) {
			t.Errorf("ValidItemKey(%q) = true", k)
		}
	}
	for _, k := range []string{"0", "pkg-1", "a_b", strings.Repeat("a", 63)} {
		if !plan.ValidItemKey(k) {
			t.Errorf("ValidItemKey(%q) = false", k)
		}
	}
}
