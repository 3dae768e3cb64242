package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestModel_PinnedToSubagentModel, end to end: a process in the
// sandbox (a granted sh running curl) asks the gateway for another model than the
// subagent's, on the chat completions and the Responses routes, plainly and with the tricks
// that make two readers disagree (a duplicate key, a case-folded one). Under a usd budget,
// none of it reaches the model API (the fake sees only the runtime's own requests, all for
// the subagent's model); each refusal is a denied tool.gateway entry and the sandbox reads a
// clear error in the API's shape.
func TestModel_PinnedToSubagentModel(t *testing.T) {
	requireTool(t, "curl")
	e := newModelEnv(t)
	e.d.Config.Models = budget.Prices{"test-model": {InputPerMTok: 1, OutputPerMTok: 2}, "o1": {InputPerMTok: 15, OutputPerMTok: 60}}
	e.capability("shell", "tools: [run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("dodger", "openai", "shell")
	post := func(route, body string) string {
		return `curl -s --unix-socket /agora/gateway/gateway.sock -H 'Content-Type: application/json' -d '` + body + `' http://gw/model/` + route + `; echo`
	}
	script := strings.Join([]string{
		post("chat/completions", `{"model":"o1-pro-2025-03-19","messages":[{"role":"user","content":"hi"}]}`),
		post("responses", `{"model":"o1-pro-2025-03-19","input":"hi"}`),
		post("chat/completions", `{"model":"test-model","model":"o1-pro-2025-03-19","messages":[]}`),
		post("chat/completions", `{"model":"test-model","Model":"o1-pro-2025-03-19","messages":[]}`),
	}, "\n")
	srv := e.model(testAPIKey,
		openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", script}})),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			got := lastToolResult(t, req)
			if strings.Count(got, `is not this subagent's model; its model requests must name \"test-model\"`) != 2 ||
				strings.Count(got, "one reading") != 2 {
				t.Errorf("the sandbox read %q, want two refusals naming the subagent's model and two of the ambiguous bodies", got)
			}
			return openaitest.Reply{Content: "done"}
		}),
	)
	r := e.run(dispatch.Request{Subagent: "dodger", Envs: []string{"model"}, Budget: budget.Budget{USD: 1}})
	wantFinished(t, r)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model API saw %d requests, want the runtime's 2", len(reqs))
	}
	for _, q := range reqs {
		if q.Body.Model != "test-model" {
			t.Errorf("the model API got a request for %q", q.Body.Model)
		}
	}
	var denied int
	for _, a := range e.audited(r, entry.ToolGateway) {
		if reason, _ := a.Details["reason"].(string); a.Details["decision"] == "denied" && strings.Contains(reason, `model not allowed: "o1-pro-2025-03-19" is not the subagent's model "test-model"`) {
			denied++
		}
	}
	if denied != 2 {
		t.Errorf("got %d denied tool.gateway entries for the other model, want 2", denied)
	}
	if r.Usage == nil || r.Usage.ModelCalls != 2 {
		t.Errorf("usage %+v, want the 2 forwarded calls only", r.Usage)
	}
}
