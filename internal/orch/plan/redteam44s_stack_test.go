package plan_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// chainPlan is a plan of n tasks, each stacked on the one before it.
func chainPlan(n int, template bool) string {
	var b strings.Builder
	b.WriteString("version: 1\nname: chain\ntasks:\n  - {id: t0, subagent: s}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: t%d, subagent: s, base: [t%d]}\n", i, i-1)
	}
	if template {
		fmt.Fprintf(&b, "  - {id: f, fan_out: {from: t0, select: 'output:x', template: {subagent: w, base: [t%d]}}}\n", n-1)
	}
	return b.String()
}

// A chain of stacked tasks longer than a stack may hold (256 patches) is refused when the
// plan is checked, naming the first task whose stack is too long, instead of running 256
// agents before the 258th task's dispatch is refused at accept. A chain whose longest stack
// is exactly 256 is a plan; so is one wide and shallow.
func TestRedTeam44S_StackLongerThanTheCap(t *testing.T) {
	mustParse(t, chainPlan(257, false)) // t256's stack: t0 ... t255, 256 patches
	errs := parseErrs(t, chainPlan(258, false))
	if len(errs) != 1 || !strings.Contains(errs[0], "tasks[257].base") || !strings.Contains(errs[0], "at most 256") {
		t.Errorf("a chain of 258: %q", errs)
	}
	// A fan-out template stacked on the chain's end: every item's stack is 257 long.
	errs = parseErrs(t, chainPlan(257, true))
	if len(errs) != 1 || !strings.Contains(errs[0], "tasks[257].fan_out.template.base") {
		t.Errorf("a template on a chain of 257: %q", errs)
	}
	// The cap is on patches, not on tasks: 300 tasks side by side under one that gathers
	// 64 of them stack fine.
	var b strings.Builder
	b.WriteString("version: 1\nname: wide\ntasks:\n")
	var ids []string
	for i := range 300 {
		fmt.Fprintf(&b, "  - {id: w%d, subagent: s}\n", i)
		if i < 64 {
			ids = append(ids, fmt.Sprintf("w%d", i))
		}
	}
	fmt.Fprintf(&b, "  - {id: top, subagent: s, base: [%s]}\n", strings.Join(ids, ", "))
	mustParse(t, b.String())
}

// A cycle can be written through base and fan-out templates, or through a base and needs;
// the plan check refuses each, so the engine never walks a stack that has no end.
func TestRedTeam44S_StackCyclesRefused(t *testing.T) {
	for name, src := range map[string]string{
		"base and needs": `version: 1
name: c
tasks:
  - {id: a, subagent: s, base: [b]}
  - {id: b, subagent: s, needs: {x: {from: a, select: patch}}}
`,
		"a producer stacked on its own fan-out": `version: 1
name: c
tasks:
  - {id: p, subagent: s, base: [g]}
  - {id: g, fan_out: {from: p, select: 'output:x', template: {subagent: s}}}
`,
		"a base's base is the task": `version: 1
name: c
tasks:
  - {id: a, subagent: s, base: [c]}
  - {id: b, subagent: s, base: [a]}
  - {id: c, subagent: s, depends_on: [b]}
`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := plan.Parse("p.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "cycle") {
				t.Fatalf("a plan with a cycle through base: %v", err)
			}
		})
	}
}

// A version spelled in another case is no version agora stores (digests are lowercase): it
// is refused, never pinned as a name of its own nor taken for the same run as the pinned
// spelling. A plan naming one subagent both bare and pinned pins the bare one only.
func TestRedTeam44S_PinSpellings(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for _, ref := range []string{"worker@SHA256:" + hex, "worker@sha256:" + strings.ToUpper(hex), "Worker", "worker@", "worker@sha256:" + hex + " "} {
		src := "version: 1\nname: p\ntasks:\n  - {id: a, subagent: '" + ref + "'}\n"
		if _, err := plan.Parse("p.yaml", []byte(src)); err == nil {
			t.Errorf("subagent %q was accepted", ref)
		}
	}
	p := mustParse(t, "version: 1\nname: p\ntasks:\n  - {id: a, subagent: worker}\n  - {id: b, subagent: 'worker@sha256:"+hex+"', review: {subagents: [judge], approve: 1}}\n  - {id: c, subagent: s2, review: {subagents: ['judge@sha256:"+hex+"'], approve: 1}}\n")
	if got := p.SubagentRefs(); strings.Join(got, ",") != "judge,s2,worker" {
		t.Errorf("SubagentRefs = %q, want judge, s2, worker", got)
	}
}

// A base must be a task of the plan as written: a fix or a reviewer (added at run time,
// `T.fix-1`, `T.review-R`), a fan-out item (`F[KEY]`) or another run's task is no id a
// plan can name, and is refused as such.
func TestRedTeam44S_BaseNamesOnlyPlanTasks(t *testing.T) {
	head := "version: 1\nname: p\ntasks:\n  - {id: t, subagent: s, verify: {command: [make]}, review: {subagents: [r], approve: 1}, on_fail: {fix: {subagent: f}}}\n" +
		"  - {id: g, fan_out: {from: t, select: 'output:x', template: {subagent: w}}}\n"
	for _, base := range []string{"t.fix-1", "t.review-r", "g[a]", "01JOTHERRUN/t", "T", ""} {
		src := head + "  - {id: c, subagent: s, base: ['" + base + "']}\n"
		if _, err := plan.Parse("p.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "tasks[2].base[0]") {
			t.Errorf("base %q: %v", base, err)
		}
	}
	// A template's items are stacked too: a need of theirs may not take the stack's key.
	src := head + "  - {id: h, fan_out: {from: t, select: 'output:y', template: {subagent: w, base: [t], needs: {base: {from: t, select: outputs}}}}}\n"
	if _, err := plan.Parse("p.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "tasks[2].fan_out.template.needs.base") {
		t.Errorf("a template's need under the stack's key: %v", err)
	}
}
