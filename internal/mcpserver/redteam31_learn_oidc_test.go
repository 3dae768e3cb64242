package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestRedTeam31_LearnPlanOverOIDCHTTP (learn): an orchestrator signed in over MCP
// HTTP with an OpenID Connect token (the official SDK client, the real provider) is an MCP
// client like any other: a plan with learn (plain, escaped key, on the second task) is
// refused before the orchestrator sees it and audited as denied under the token's subject;
// a plan without learn reaches the orchestrator with an actor that starts "mcp:", so the
// service and the executor refuse learn to the run as well (their checks read that prefix).
func TestRedTeam31_LearnPlanOverOIDCHTTP(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: oidcServices})
	f := newFixture()
	o := &fakeOrchestrator{}
	f.orch = o
	addr := f.http(t, mcpserver.HTTPConfig{OIDC: oidcVerifier(t, p.Issuer)})
	cs := sdkOIDCSession(t, "http://"+addr+"/mcp", "svc-platform", "platform-secret")
	for _, plan := range []string{
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w","learn":true}]}`,
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w"},{"id":"b","subagent":"w","l\u0065arn":true}]}`,
		`{"version":1,"name":"p","t\u0061sks":[{"id":"a","subagent":"w","learn":true}]}`,
	} {
		before := len(f.audit.all())
		res := call(t, cs, "agora_orchestrator_submit", rawArgs(`{"plan":`+plan+`}`))
		if !res.IsError || !strings.Contains(text(res), "MCP client cannot start a learn dispatch") {
			t.Errorf("%s: got error=%v %q, want the learn refusal", plan, res.IsError, text(res))
		}
		if o.submitted != nil {
			t.Fatalf("%s: the orchestrator was handed the plan", plan)
		}
		es := f.audit.all()[before:]
		if len(es) != 1 || es[0].Kind != entry.MCPToolDenied || es[0].Details["decision"] != "denied" ||
			es[0].Actor != "oidc:"+p.Issuer+"#svc-platform" || es[0].Details["ceiling"] != "orchestrate" {
			t.Errorf("%s: audit %+v, want one mcp.tool.denied under the token's subject with its ceiling", plan, es)
		}
	}
	plain := `{"version":1,"name":"p","tasks":[{"id":"a","subagent":"w"}]}`
	if res := call(t, cs, "agora_orchestrator_submit", rawArgs(`{"plan":`+plain+`}`)); res.IsError {
		t.Fatalf("a plan without learn: %s", text(res))
	}
	if want := "mcp:oidc:" + p.Issuer + "#svc-platform"; o.actor != want {
		t.Errorf("the orchestrator was told actor %q, want %q (the service's and executor's learn refusals read its mcp: prefix)", o.actor, want)
	}
}
