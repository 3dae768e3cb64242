package plan_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// TestRedTeam30_PlanHasNoLearnKey: a plan asks for learn only as a task's
// exact key `learn: true` (the key now exists, a person's decision). Every other
// spelling or place is refused when the plan is read: another case, mode: learn, the plan's
// own learn, learn inside defaults, YAML's merge tricks.
func TestRedTeam30_PlanHasNoLearnKey(t *testing.T) {
	for _, src := range []string{
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, Learn: true}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, mode: learn}\n",
		"version: 1\nname: p\nlearn: true\ntasks:\n  - {id: a, subagent: w}\n",
		"version: 1\nname: p\ndefaults: {learn: true}\ntasks:\n  - {id: a, subagent: w}\n",
		"version: 1\nname: p\ndefaults: &d {learn: true}\ntasks:\n  - {<<: *d, id: a, subagent: w}\n",
		"version: 1\nname: p\ntasks:\n  - id: a\n    subagent: w\n    <<: {learn: true}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, learn: yes}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, learn: 1}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, learn: true, learn: true}\n",
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","LEARN":true}]}`,
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":true,"learn":false}]}`,
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn ":true}]}`,
	} {
		if p, err := plan.Parse("plan.yaml", []byte(src)); err == nil {
			t.Errorf("a plan asking for learn wrongly was read: %q -> learn tasks %v", src, p.LearnTasks())
		}
	}
	// The exact key, in YAML, in JSON (as agora_orchestrator_submit sends it) and escaped, is
	// read as learn; false and absent are not learn and keep the digest of a plan without it.
	for _, src := range []string{
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, learn: true}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, \"le\\x61rn\": true}\n",
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","le\u0061rn":true}]}`,
	} {
		p, err := plan.Parse("plan.yaml", []byte(src))
		if err != nil || strings.Join(p.LearnTasks(), ",") != "a" {
			t.Errorf("%q: learn tasks %v, err %v; want [a]", src, p.LearnTasks(), err)
		}
	}
	plain, err := plan.Parse("plan.yaml", []byte("version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, target: learning}\n"))
	if err != nil {
		t.Fatalf("the control (a plain task) was refused: %v", err)
	}
	off, err := plan.Parse("plan.yaml", []byte("version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, target: learning, learn: false}\n"))
	if err != nil || off.LearnTasks() != nil || off.Digest() != plain.Digest() {
		t.Errorf("learn: false: %v, learn tasks %v, digest equal %v", err, off.LearnTasks(), off.Digest() == plain.Digest())
	}
	on, _ := plan.Parse("plan.yaml", []byte("version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, target: learning, learn: true}\n"))
	if on.Digest() == plain.Digest() {
		t.Error("learn: true did not change the plan's digest: a learn run would be mistaken for the plain one")
	}
	// The canonical form (what orch.db stores and reads back) keeps learn.
	back, err := plan.Parse("orch.db", on.Canonical())
	if err != nil || strings.Join(back.LearnTasks(), ",") != "a" || back.Resolve()[0].Learn != true {
		t.Errorf("canonical round trip lost learn: %v %v\n%s", err, back, on.Canonical())
	}
}

// TestLearnTask_ProductsFeedNothing: a learn task's products are evidence for a
// person, never another task's input, so the plan is refused when it is read if any task
// takes them (needs, a fan-out's from or its template's needs), if the learn task has a
// review or a fix loop (both would judge or repair its patch), or if learn sits on a fan-out
// task. Each problem is placed at its path.
func TestLearnTask_ProductsFeedNothing(t *testing.T) {
	head := "version: 1\nname: p\ntasks:\n"
	for _, c := range []struct{ src, want string }{
		{"  - {id: a, subagent: w, learn: true}\n  - {id: b, subagent: w, needs: {up: {from: a, select: patch}}}\n",
			`tasks[1].needs.up.from: task "a" is a learn task`},
		{"  - {id: a, subagent: w, learn: true}\n  - {id: b, subagent: w, needs: {up: {from: a, select: outputs}}}\n",
			`tasks[1].needs.up.from: task "a" is a learn task`},
		{"  - {id: a, subagent: w, learn: true}\n  - {id: b, fan_out: {from: a, select: output:items.json, template: {subagent: w}}}\n",
			`tasks[1].fan_out.from: task "a" is a learn task`},
		{"  - {id: a, subagent: w, learn: true}\n  - {id: s, subagent: w}\n  - {id: b, fan_out: {from: s, select: output:items.json, template: {subagent: w, needs: {x: {from: a, select: patch}}}}}\n",
			`tasks[2].fan_out.template.needs.x.from: task "a" is a learn task`},
		{"  - {id: a, subagent: w, learn: true, review: {subagents: [r], approve: 1}}\n",
			"tasks[0].learn: a learn task's patch is never reviewed"},
		{"  - {id: a, subagent: w, learn: true, on_fail: {fix: {subagent: f}}, verify: {command: [make]}}\n",
			"tasks[0].learn: a learn task's patch is never fixed"},
		{"  - {id: s, subagent: w}\n  - {id: b, learn: true, fan_out: {from: s, select: output:items.json, template: {subagent: w}}}\n",
			"tasks[1].learn: a fan_out task runs nothing itself"},
		{"  - {id: s, subagent: w}\n  - {id: b, fan_out: {from: s, select: output:items.json, template: {subagent: w, learn: true}}}\n",
			`unknown field "learn"`},
	} {
		_, err := plan.Parse("p.yaml", []byte(head+c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant an error containing %q", c.src, err, c.want)
		}
	}
	// A learn task depending on plain work, and plain work only ordered after a learn task
	// (depends_on, no hand-off), are fine.
	if _, err := plan.Parse("p.yaml", []byte(head+"  - {id: a, subagent: w}\n  - {id: b, subagent: w, learn: true, needs: {up: {from: a, select: patch}}}\n  - {id: c, subagent: w, depends_on: [b]}\n")); err != nil {
		t.Errorf("a learn task taking plain work: %v", err)
	}
}
