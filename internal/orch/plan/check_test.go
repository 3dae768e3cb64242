package plan_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// fakeRefs is a catalog of known names; it counts lookups. A subagent in execs may not review.
type fakeRefs struct {
	subagents, envs, targets, workspaces []string
	queues                               []string // nil: only the default queue
	execs                                []string
	calls                                map[string]int
}

func (f *fakeRefs) lookup(kind string, known []string, ref string) error {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[kind+" "+ref]++
	name, _, _ := strings.Cut(ref, "@")
	for _, k := range known {
		if k == name {
			return nil
		}
	}
	return fmt.Errorf("%s %q not found; known: %s", kind, ref, strings.Join(known, ", "))
}

func (f *fakeRefs) Subagent(_ context.Context, ref string) error {
	return f.lookup("subagent", f.subagents, ref)
}

// Reviewer is Subagent, counted as "reviewer REF on TARGET", refusing the execs.
func (f *fakeRefs) Reviewer(_ context.Context, ref, target string) error {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls["reviewer "+ref+" on "+target]++
	name, _, _ := strings.Cut(ref, "@")
	if slices.Contains(f.execs, name) {
		return fmt.Errorf("subagent %q runs the exec runtime: it cannot review", ref)
	}
	if !slices.Contains(f.subagents, name) {
		return fmt.Errorf("subagent %q not found; known: %s", ref, strings.Join(f.subagents, ", "))
	}
	return nil
}

func (f *fakeRefs) Env(_ context.Context, ref string) error {
	return f.lookup("env bundle", f.envs, ref)
}

func (f *fakeRefs) Target(_ context.Context, name string) error {
	return f.lookup("target", f.targets, name)
}

func (f *fakeRefs) Queue(_ context.Context, name string) error {
	known := f.queues
	if known == nil {
		known = []string{plan.DefaultQueue}
	}
	return f.lookup("queue", known, name)
}

// Workspace knows the workspaces in f.workspaces, each allowing only the revision "main".
func (f *fakeRefs) Workspace(_ context.Context, ref, revision string) error {
	if err := f.lookup("workspace", f.workspaces, ref); err != nil {
		return err
	}
	if revision != "" && revision != "main" {
		return fmt.Errorf("workspace %q: revision %q is not allowed; allowed revisions: main", ref, revision)
	}
	return nil
}

func TestPlan_Check(t *testing.T) {
	src := `version: 1
name: p
defaults: {target: local, env: [base, gone]}
tasks:
  - {id: a, subagent: fixer}
  - {id: b, subagent: x, env: [base], target: gpu}
  - {id: c, subagent: x}
  - {id: d, subagent: fixer, env: [extra, gone], target: local}
`
	p := mustParse(t, src)
	refs := &fakeRefs{subagents: []string{"a", "fixer"}, envs: []string{"base", "extra"}, targets: []string{"local"}}
	err := p.Check(t.Context(), refs)
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Check = %v (%T), want strictyaml.Errors", err, err)
	}
	want := []string{
		`p.yaml:3: defaults.env[1]: env bundle "gone" not found; known: base, extra`,
		`p.yaml:6: tasks[1].subagent: subagent "x" not found; known: a, fixer`,
		`p.yaml:6: tasks[1].target: target "gpu" not found; known: local`,
		`p.yaml:7: tasks[2].subagent: subagent "x" not found; known: a, fixer`,
		`p.yaml:8: tasks[3].env[1]: env bundle "gone" not found; known: base, extra`,
	}
	if diff := cmp.Diff(want, strings.Split(es.Error(), "\n")); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
	for ref, n := range refs.calls {
		if n != 1 {
			t.Errorf("%s looked up %d times, want once", ref, n)
		}
	}
	if len(refs.calls) != 8 { // 7 and the default queue
		t.Errorf("looked up %d distinct references, want 8: %v", len(refs.calls), refs.calls)
	}
}

func TestPlan_Check_AllFound(t *testing.T) {
	p := mustParse(t, fullPlan)
	refs := &fakeRefs{subagents: []string{"fixer", "writer"}, envs: []string{"base", "extra"}, targets: []string{"local", "big"}}
	if err := p.Check(t.Context(), refs); err != nil {
		t.Fatalf("Check: %v", err)
	}
	// the pinned reference is passed whole
	if refs.calls["subagent fixer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"] != 1 {
		t.Errorf("pinned subagent not looked up as written: %v", refs.calls)
	}
}

func TestPlan_Check_NilRefs(t *testing.T) {
	if err := mustParse(t, fullPlan).Check(t.Context(), nil); err != nil {
		t.Fatalf("Check(nil) = %v, want nil", err)
	}
}

// TestPlan_Check_HandBuilt checks a plan that did not come from Parse: no lines to give.
func TestPlan_Check_HandBuilt(t *testing.T) {
	p := &plan.Plan{Version: 1, Name: "p", Concurrency: 1, Tasks: []plan.Task{{ID: "a", Subagent: "nope"}}}
	err := p.Check(t.Context(), &fakeRefs{})
	if want := `tasks[0].subagent: subagent "nope" not found; known: `; err == nil || err.Error() != want {
		t.Fatalf("Check = %v, want %q", err, want)
	}
}

// A model writing a plan gets every problem in one answer: a cycle, an unknown subagent, a
// bad timeout, a bad lock and an unknown workspace together, each with its path; a
// reference that is already wrong in form is reported once, not looked up.
func TestValidate_StructureAndCatalogAtOnce(t *testing.T) {
	src := `version: 1
name: all-wrong
workspace: nowhere
tasks:
  - {id: a, subagent: fixer, depends_on: [b]}
  - {id: b, subagent: nobody, depends_on: [a]}
  - {id: c, subagent: fixer, timeout: -5s}
  - {id: d, subagent: "Bad Name", locks: [{name: x, mode: sometimes}]}
`
	refs := &fakeRefs{subagents: []string{"fixer"}, targets: []string{"local"}, workspaces: []string{"app"}}
	_, err := plan.Validate(t.Context(), "plan.yaml", []byte(src), refs)
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("got %v, want strictyaml.Errors", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"cycle",
		`tasks[1].subagent: subagent "nobody" not found; known: fixer`,
		"tasks[2].timeout",
		"tasks[3].locks[0]",
		"tasks[3].subagent",
		`workspace: workspace "nowhere" not found; known: app`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "tasks[3].subagent"); n != 1 {
		t.Errorf("tasks[3].subagent reported %d times, want once:\n%s", n, msg)
	}
	if _, err := plan.Parse("plan.yaml", []byte(src)); err == nil || strings.Contains(err.Error(), "not found") {
		t.Errorf("Parse looks nothing up: %v", err)
	}
}

// The workspace is looked up with the plan's revision, and a revision that is wrong in form is
// reported once, without a lookup.
func TestValidate_Workspace(t *testing.T) {
	for _, tt := range []struct {
		head, want string
		lookups    int
	}{
		{"workspace: app\n", "", 1},
		{"workspace: app\nrevision: main\n", "", 1},
		{"workspace: app\nrevision: release/2\n", `plan.yaml:3: workspace: workspace "app": revision "release/2" is not allowed; allowed revisions: main`, 1},
		{"workspace: docs\n", `plan.yaml:3: workspace: workspace "docs" not found; known: app`, 1},
		{"workspace: app\nrevision: main~1\n", "plan.yaml:4: revision: ", 0},
		{"revision: main\n", "plan.yaml:3: revision: a revision needs a workspace", 0},
	} {
		refs := &fakeRefs{subagents: []string{"s"}, workspaces: []string{"app"}}
		src := "version: 1\nname: p\n" + tt.head + "tasks: [{id: a, subagent: s}]\n"
		_, err := plan.Validate(t.Context(), "plan.yaml", []byte(src), refs)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.head, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%q: got %v, want %q...", tt.head, err, tt.want)
		}
		n := 0
		for k, c := range refs.calls {
			if strings.HasPrefix(k, "workspace ") {
				n += c
			}
		}
		if n != tt.lookups {
			t.Errorf("%q: %d workspace lookups, want %d", tt.head, n, tt.lookups)
		}
	}
}

// TestPlan_Check_Reviewers: every reviewer is checked as one (Refs.Reviewer), on the target its
// task runs on (the task's, else the defaults', else "" for agora.yaml's default): a task's,
// a fan-out template's (its items are reviewed), and so those of a task with a fix loop (the
// fix's work is reviewed by the same reviewers on the same target). The fixer is an ordinary
// subagent reference: it may run any runtime.
func TestPlan_Check_Reviewers(t *testing.T) {
	src := `version: 1
name: p
defaults: {target: big}
tasks:
  - {id: a, subagent: writer, review: {subagents: [judge, script], approve: 1}, on_fail: {fix: {subagent: script}}}
  - {id: b, subagent: writer, target: local, review: {subagents: [judge], approve: 1}}
  - {id: items, subagent: writer}
  - id: each
    fan_out: {from: items, select: "output:list.json", template: {subagent: writer, review: {subagents: [script], approve: 1}}}
`
	refs := &fakeRefs{subagents: []string{"writer", "judge", "script"}, execs: []string{"script"}, targets: []string{"local", "big"}}
	err := mustParse(t, src).Check(t.Context(), refs)
	want := []string{
		`p.yaml:5: tasks[0].review.subagents[1]: subagent "script" runs the exec runtime: it cannot review`,
		`p.yaml:9: tasks[3].fan_out.template.review.subagents[0]: subagent "script" runs the exec runtime: it cannot review`,
	}
	if err == nil {
		t.Fatal("Check took exec reviewers")
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
	for _, k := range []string{"reviewer judge on big", "reviewer script on big", "reviewer judge on local", "subagent script"} {
		if refs.calls[k] != 1 {
			t.Errorf("%q looked up %d times, want once: %v", k, refs.calls[k], refs.calls)
		}
	}
	// No target anywhere: the reviewers are checked on agora.yaml's default ("").
	refs = &fakeRefs{subagents: []string{"writer", "judge"}}
	if err := mustParse(t, "version: 1\nname: p\ntasks: [{id: a, subagent: writer, review: {subagents: [judge], approve: 1}}]\n").Check(t.Context(), refs); err != nil {
		t.Fatal(err)
	}
	if refs.calls["reviewer judge on "] != 1 {
		t.Errorf("lookups %v, want the reviewer checked on the default target", refs.calls)
	}
}
