package plan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/plan"
)

const stackPlan = `version: 1
name: chain
tasks:
  - {id: impl, subagent: coder}
  - {id: docs, subagent: writer, base: [impl]}
  - {id: migrate, subagent: coder, base: [docs], depends_on: [impl]}
`

// base is written to the canonical form (so a stacked plan and its unstacked twin differ in
// digest), resolves into Base as written and into Deps, and reads back equal.
func TestParse_Base(t *testing.T) {
	p := mustParse(t, stackPlan)
	if !strings.Contains(string(p.Canonical()), `{"base":["impl"],"id":"docs","subagent":"writer"}`) {
		t.Errorf("canonical form lacks base:\n%s", p.Canonical())
	}
	flat := mustParse(t, strings.NewReplacer("base: [impl]", "depends_on: [impl]", "base: [docs], depends_on: [impl]", "depends_on: [docs, impl]").Replace(stackPlan))
	if flat.Digest() == p.Digest() {
		t.Error("base and depends_on give one digest: a stacked plan would return its unstacked twin's run")
	}
	again := mustParse(t, string(p.Canonical()))
	if again.Digest() != p.Digest() {
		t.Errorf("canonical form parses to another digest: %s, %s", again.Digest(), p.Digest())
	}
	r := p.Resolve()
	if !slices.Equal(r[1].Base, []string{"impl"}) || !slices.Equal(r[1].Deps, []string{"impl"}) {
		t.Errorf("docs: base %q deps %q", r[1].Base, r[1].Deps)
	}
	if !slices.Equal(r[2].Base, []string{"docs"}) || !slices.Equal(r[2].Deps, []string{"docs", "impl"}) {
		t.Errorf("migrate: base %q deps %q", r[2].Base, r[2].Deps)
	}
	outline, err := plan.ReadOutline(p.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(outline[1].Deps, []string{"impl"}) {
		t.Errorf("the outline of docs waits for %q, want impl (its base)", outline[1].Deps)
	}
}

func TestParse_BaseErrors(t *testing.T) {
	head := "version: 1\nname: p\ntasks:\n  - {id: a, subagent: s}\n"
	many := make([]string, 65)
	for i := range many {
		many[i] = "a"
	}
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown, itself, twice", head + "  - {id: b, subagent: s, base: [nope, b, a, a]}", []string{
			`p.yaml:5: tasks[1].base[0]: unknown task "nope"`,
			`p.yaml:5: tasks[1].base[1]: task "b" depends on itself`,
			`p.yaml:5: tasks[1].base[3]: task "a" listed twice`,
		}},
		{"a cycle through base", "version: 1\nname: p\ntasks:\n  - {id: a, subagent: s, base: [b]}\n  - {id: b, subagent: s, depends_on: [a]}", []string{
			"p.yaml:4: tasks[0].base[0]: cycle: a -> b -> a",
		}},
		{"too many", head + "  - {id: b, subagent: s, base: [" + strings.Join(many, ", ") + "]}", []string{
			"p.yaml:5: tasks[1].base: 65 bases; at most 64",
		}},
		{"a fan-out group", head + "  - {id: f, fan_out: {from: a, select: 'output:x', template: {subagent: w}}}\n  - {id: c, subagent: s, base: [f]}", []string{
			`p.yaml:6: tasks[2].base[0]: task "f" is a fan_out group: its items' patches are parallel work on one tree, not one line of work to build on; stack on a task that gathers them (needs from "f", applying each patch) instead`,
		}},
		{"a fan-out task itself", head + "  - {id: f, base: [a], fan_out: {from: a, select: 'output:x', template: {subagent: w}}}", []string{
			"p.yaml:5: tasks[1].base: a fan_out task runs nothing itself: move base into fan_out.template",
		}},
		{"a learn task", head + "  - {id: l, subagent: s, learn: true}\n  - {id: c, subagent: s, base: [l]}\n  - {id: f, fan_out: {from: a, select: 'output:x', template: {subagent: w, base: [l]}}}", []string{
			`p.yaml:6: tasks[2].base[0]: task "l" is a learn task: its products feed no other task (docs/learn.md); a person takes its patch with ` + "`agora dispatch patch ID --include-learn`",
			`p.yaml:7: tasks[3].fan_out.template.base[0]: task "l" is a learn task: its products feed no other task (docs/learn.md); a person takes its patch with ` + "`agora dispatch patch ID --include-learn`",
		}},
		{"a need under the stack's key", head + "  - {id: c, subagent: s, base: [a], needs: {base: {from: a, select: outputs}}}", []string{
			"p.yaml:5: tasks[1].needs.base: a stacked task's bases are mounted under /agora/inputs/base/TASK/: name this input otherwise",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseErrs(t, tt.src)); diff != "" {
				t.Errorf("Parse errors (-want +got):\n%s", diff)
			}
		})
	}
	// A template may stack its items on a plan task, and an unstacked task may name "base".
	mustParse(t, head+"  - {id: f, fan_out: {from: a, select: 'output:x', template: {subagent: w, base: [a]}}}\n  - {id: c, subagent: s, needs: {base: {from: a, select: patch}}}")
}

// StackOrder: each base after its own bases, each task once, in the order written; a task
// not in the run is left out.
func TestStackOrder(t *testing.T) {
	bases := map[string][]string{
		"impl": nil, "docs": {"impl"}, "migrate": {"docs"},
		"left": {"impl"}, "right": {"impl"}, "join": {"left", "right"},
		"wide": {"right", "docs", "ghost"},
	}
	of := func(id string) ([]string, bool) {
		b, ok := bases[id]
		return b, ok
	}
	for _, tt := range []struct {
		base []string
		want []string
	}{
		{nil, nil},
		{[]string{"impl"}, []string{"impl"}},
		{[]string{"migrate"}, []string{"impl", "docs", "migrate"}},
		{[]string{"left", "right"}, []string{"impl", "left", "right"}},
		{[]string{"join", "docs"}, []string{"impl", "left", "right", "join", "docs"}},
		{bases["wide"], []string{"impl", "right", "docs"}},
	} {
		if got := plan.StackOrder(tt.base, of); !slices.Equal(got, tt.want) {
			t.Errorf("StackOrder(%q) = %q, want %q", tt.base, got, tt.want)
		}
	}
	// A chain of 100,000 tasks walks without recursion.
	n := 100_000
	long := func(id string) ([]string, bool) {
		var i int
		for _, c := range id[1:] {
			i = i*10 + int(c-'0')
		}
		if i == 0 {
			return nil, true
		}
		return []string{"t" + itoa(i-1)}, true
	}
	if got := plan.StackOrder([]string{"t" + itoa(n-1)}, long); len(got) != n || got[0] != "t0" {
		t.Errorf("a chain of %d: %d tasks, first %q", n, len(got), got[0])
	}
}

// SubagentRefs lists each bare name once, from tasks, templates, reviews and fixes; pinned
// references are left out.
func TestSubagentRefs(t *testing.T) {
	p := mustParse(t, `version: 1
name: refs
tasks:
  - {id: a, subagent: coder, review: {subagents: [r1, 'r2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'], approve: 1}, on_fail: {fix: {subagent: fixer}}}
  - {id: b, subagent: coder}
  - {id: f, fan_out: {from: b, select: 'output:x', template: {subagent: itemer}}}
  - {id: p, subagent: 'pinned@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}
`)
	if got, want := p.SubagentRefs(), []string{"coder", "fixer", "itemer", "r1"}; !slices.Equal(got, want) {
		t.Errorf("SubagentRefs = %q, want %q", got, want)
	}
}
