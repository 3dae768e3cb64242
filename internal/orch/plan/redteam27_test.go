package plan_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// TestRedTeam27_ExtensionKeysCannotWiden: a plan author (a model over MCP included) cannot
// make a quorum pass with fewer approvals (a reviewer twice under another pin or case, an
// approve of 0 or over the count), loop a fix without bound, nest a fan-out, give an item's
// task an id or an item of its own, or name a declared task like an added one.
func TestRedTeam27_ExtensionKeysCannotWiden(t *testing.T) {
	const pin = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	head := "version: 1\nname: rt\ntasks:\n  - {id: split, subagent: s}\n"
	for _, c := range []struct{ name, tasks, want string }{
		{"reviewer twice, once pinned", `  - {id: t, subagent: w, review: {subagents: [r1, "r1` + pin + `"], approve: 2}}`, "listed twice"},
		{"approve 0", `  - {id: t, subagent: w, review: {subagents: [r1], approve: 0}}`, "want 1 to 1"},
		{"approve over the reviewers", `  - {id: t, subagent: w, review: {subagents: [r1, r2], approve: 3}}`, "want 1 to 2"},
		{"approve negative", `  - {id: t, subagent: w, review: {subagents: [r1], approve: -1}}`, "want 1 to 1"},
		{"approve left out", `  - {id: t, subagent: w, review: {subagents: [r1]}}`, "required"},
		{"approve as a string", `  - {id: t, subagent: w, review: {subagents: [r1], approve: "1"}}`, "approve"},
		{"no reviewers", `  - {id: t, subagent: w, review: {subagents: [], approve: 1}}`, "required"},
		{"ten reviewers", `  - {id: t, subagent: w, review: {subagents: [a, b, c, d, e, f, g, h, i, j], approve: 1}}`, "at most 9"},
		{"a reviewer in upper case", `  - {id: t, subagent: w, review: {subagents: [r1, R1], approve: 1}}`, "subagents[1]"},
		{"fix attempts 0", `  - {id: t, subagent: w, verify: {command: [true]}, on_fail: {fix: {subagent: f, max_attempts: 0}}}`, "want 1 to 10"},
		{"fix attempts 11", `  - {id: t, subagent: w, verify: {command: [true]}, on_fail: {fix: {subagent: f, max_attempts: 11}}}`, "want 1 to 10"},
		{"fix without a gate", `  - {id: t, subagent: w, on_fail: {fix: {subagent: f}}}`, "needs a gate"},
		{"a declared id like a fix", `  - {id: t.fix-1, subagent: w}`, "tasks[1].id"},
		{"a declared id like an item", `  - {id: "f[0]", subagent: w}`, "tasks[1].id"},
		{"a declared id like a reviewer", `  - {id: t.review-r1, subagent: w}`, "tasks[1].id"},
		{"a fan-out in a template", `  - {id: f, fan_out: {from: split, select: "output:a.json", template: {subagent: w, fan_out: {from: split, select: "output:b.json", template: {subagent: w}}}}}`, "fan_out"},
		{"an id in a template", `  - {id: f, fan_out: {from: split, select: "output:a.json", template: {id: x, subagent: w}}}`, "id"},
		{"an item in a template's input", `  - {id: f, fan_out: {from: split, select: "output:a.json", template: {subagent: w, input: {item: forged}}}}`, "input.item"},
		{"a fan-out fed by a fan-out", "  - {id: f, fan_out: {from: split, select: \"output:a.json\", template: {subagent: w}}}\n  - {id: g, fan_out: {from: f, select: \"output:a.json\", template: {subagent: w}}}", "leaves no list"},
		{"a producer with a review", "  - {id: p, subagent: w, review: {subagents: [r1], approve: 1}}\n  - {id: f, fan_out: {from: p, select: \"output:a.json\", template: {subagent: w}}}", "cannot wait for a judgment"},
		{"a list outside the outputs", `  - {id: f, fan_out: {from: split, select: "output:../result.json", template: {subagent: w}}}`, "select"},
		{"a select other than output", `  - {id: f, fan_out: {from: split, select: "patch", template: {subagent: w}}}`, "want output:PATH"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := plan.Parse("plan.yaml", []byte(head+c.tasks+"\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want an error with %q", err, c.want)
			}
		})
	}
	// The JSON form a model sends over MCP: approve exactly an integer, written once, in its
	// own case.
	for _, a := range []string{`2.0`, `1e0`, `0x1`, `"2"`, `true`, `2, "approve": 1`, `2, "Approve": 1`} {
		src := `{"version":1,"name":"rt","tasks":[{"id":"t","subagent":"w","review":{"subagents":["r1","r2"],"approve":` + a + `}}]}`
		if _, err := plan.Parse("plan.json", []byte(src)); err == nil || !strings.Contains(err.Error(), "pprove") {
			t.Errorf("approve %s: %v; want refused", a, err)
		}
	}
	// A scheduled run's id is NAME@SLOT, chosen by the scheduler; a plan submitted by hand
	// (over MCP too) is named without '@', so it can never take a slot's id.
	for _, name := range []string{"nightly@2026-11-24T01:00:00Z", "nightly@", "@x"} {
		src := "version: 1\nname: \"" + name + "\"\ntasks:\n  - {id: a, subagent: s}\n"
		if _, err := plan.Parse("plan.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "name") {
			t.Errorf("plan name %q: %v; want refused", name, err)
		}
	}
}
