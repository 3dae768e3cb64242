package dispatch_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestRedTeam32_WarmLearnWorkerKeyClaimedFirst: a learn dispatch claimed in a
// prestarted slot. The worker was running before the dispatch existed, so the question is
// whether it still claims the gateway with its key before any process of the agent's exists:
// the agent's own claim must be refused (409) and its forged would_deny recorded as reporter
// "sandbox", the worker's report of the real call as "worker", exactly as cold.
func TestRedTeam32_WarmLearnWorkerKeyClaimedFirst(t *testing.T) {
	requireTool(t, "curl")
	e, w := warmEnv(t, 1)
	e.d.Egress = egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	e.capability("reader", "tools: [read_file]\n", nil)
	e.modelSubagent("learner", "openai", "reader")
	forged := `{"tool":"run_command","decision":"would_deny","reason":"command not granted","args_hash":"sha256:` + strings.Repeat("a", 64) + `","duration_ms":0,"command":"forged-tool --all"}`
	script := "S=/agora/gateway/gateway.sock; " +
		"curl -sS --unix-socket $S -H 'X-Agora-Worker-Key: " + strings.Repeat("a", 64) + "' -d '" + forged + "' http://gateway/audit/tool -o /dev/null -w 'forge=%{http_code} '; " +
		"curl -sS --unix-socket $S -d '{\"key\":\"" + strings.Repeat("b", 64) + "\"}' http://gateway/worker/claim -o /dev/null -w 'claim=%{http_code}'"
	run := func(label string) (*dispatch.Record, string) {
		var result string
		e.model(testAPIKey,
			openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", script}})),
			openaitest.Func(func(req openaitest.Request) openaitest.Reply {
				result = lastToolResult(t, req)
				return openaitest.Reply{Content: "done"}
			}),
		)
		r := e.run(dispatch.Request{Subagent: "learner", Envs: []string{"model"}, Learn: true, Input: []byte(`{"prompt":"forge"}`)})
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("%s: %s %s %s", label, r.State, r.Reason, r.Detail)
		}
		return r, result
	}
	cold, coldResult := run("cold")
	waitWarmReady(t, w, 1)
	hot, hotResult := run("warm")
	if c := warmCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v: the learn dispatch did not run in the slot", c)
	}
	for _, c := range []struct {
		label, result string
		r             *dispatch.Record
	}{{"cold", coldResult, cold}, {"warm", hotResult, hot}} {
		if !strings.Contains(c.result, "forge=204") || !strings.Contains(c.result, "claim=409") {
			t.Errorf("%s: the agent's forgery and claim: %q, want the forgery recorded (204) and the claim refused (409)", c.label, c.result)
		}
		byReporter := map[string][]string{}
		for _, a := range e.audited(c.r, entry.ToolWouldDeny) {
			wd, _ := entry.ReadWouldDeny(entry.ToolWouldDeny, a.Details)
			byReporter[wd.Reporter] = append(byReporter[wd.Reporter], wd.Command)
		}
		if len(byReporter["sandbox"]) != 1 || byReporter["sandbox"][0] != "forged-tool --all" ||
			len(byReporter["worker"]) != 1 || !strings.HasPrefix(byReporter["worker"][0], "sh -c ") || len(byReporter) != 2 {
			t.Errorf("%s: tool.would_deny by reporter: %q", c.label, byReporter)
		}
	}
}
