package plan_test

import (
	"testing"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// TestRedTeam30_PlanHasNoLearnKey (#30 red team b): a plan cannot ask for learn by itself (the
// person makes a plan's tasks learn only by a target in mode: learn, submitted from the CLI):
// learn as a task's key or the plan's, in any spelling, with YAML's tricks (a merge key, a
// quoted key, JSON syntax as agora_orchestrator_submit sends it), is refused when the plan is
// read.
func TestRedTeam30_PlanHasNoLearnKey(t *testing.T) {
	for _, src := range []string{
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, learn: true}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, Learn: true}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, \"learn\": true}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, \"le\\x61rn\": true}\n",
		"version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, mode: learn}\n",
		"version: 1\nname: p\nlearn: true\ntasks:\n  - {id: a, subagent: w}\n",
		"version: 1\nname: p\ndefaults: &d {learn: true}\ntasks:\n  - {<<: *d, id: a, subagent: w}\n",
		"version: 1\nname: p\ntasks:\n  - id: a\n    subagent: w\n    <<: {learn: true}\n",
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":true}]}`,
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","le\u0061rn":true}]}`,
	} {
		if p, err := plan.Parse("plan.yaml", []byte(src)); err == nil {
			t.Errorf("a plan asking for learn was read: %q -> %+v", src, p)
		}
	}
	if _, err := plan.Parse("plan.yaml", []byte("version: 1\nname: p\ntasks:\n  - {id: a, subagent: w, target: learning}\n")); err != nil {
		t.Fatalf("the control (a plain task) was refused: %v", err)
	}
}
