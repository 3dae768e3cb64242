package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestLearn_MCPPlanWithLearnRefusedAndAudited: a plan task's learn is a person's
// key. agora_orchestrator_submit with a plan whose task has learn (true or false, escaped,
// among other tasks, twice) is refused saying why, the orchestrator never sees it, and the
// call is audited as denied (mcp.tool.denied), never as a call that ran; a plan that cannot
// be read one way (learn and Learn in one task) is refused as invalid. A learn key inside a
// task's input is the agent's input and passes. Failed before: a plan with learn reached
// the orchestrator service (refused there only by its decoder, audited as allowed here).
func TestLearn_MCPPlanWithLearnRefusedAndAudited(t *testing.T) {
	for _, c := range []struct{ plan, want, decision string }{
		{`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":true}]}`, "task a has learn", "denied"},
		{`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":false}]}`, "task a has learn", "denied"},
		{`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w"},{"id":"b","subagent":"w","le\u0061rn":true}]}`, "task b has learn", "denied"},
		{`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":true,"learn":true}]}`, "", "invalid"},
		{`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":true,"Learn":false}]}`, "not one readable JSON object", "invalid"},
		{`{"version":1,"name":"p","tasks":[{"subagent":"w","learn":true}]}`, "task tasks[0] has learn", "denied"},
	} {
		t.Run(c.plan, func(t *testing.T) {
			f := newFixture()
			o := &fakeOrchestrator{}
			f.orch = o
			cs := f.stdio(t, tester, mcpserver.Limits{})
			res := call(t, cs, "agora_orchestrator_submit", rawArgs(`{"plan":`+c.plan+`}`))
			if !res.IsError || !strings.Contains(text(res), c.want) {
				t.Fatalf("got error=%v %q, want a refusal containing %q", res.IsError, text(res), c.want)
			}
			if c.decision == "denied" && !strings.Contains(text(res), "MCP client cannot start a learn dispatch") {
				t.Errorf("the refusal does not say why: %q", text(res))
			}
			if o.submitted != nil {
				t.Errorf("the orchestrator was handed the plan: %s", o.submitted)
			}
			es := f.audit.all()
			kind := entry.MCPToolDenied
			if c.decision == "invalid" {
				kind = entry.MCPToolCall
			}
			if len(es) != 1 || es[0].Kind != kind || es[0].Details["decision"] != c.decision {
				t.Errorf("audit = %+v, want one %s entry with decision %s", es, kind, c.decision)
			}
		})
	}
	f := newFixture()
	o := &fakeOrchestrator{}
	f.orch = o
	cs := f.stdio(t, tester, mcpserver.Limits{})
	plan := `{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","input":{"learn":true}}]}`
	if res := call(t, cs, "agora_orchestrator_submit", rawArgs(`{"plan":`+plan+`}`)); res.IsError || string(o.submitted) != plan {
		t.Errorf("learn inside a task's input: %q; submitted %s", text(res), o.submitted)
	}
}
