package dispatch_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestModel_GatewayFloodFailsLimitExceeded, end to end: an agent
// that floods the gateway socket from a granted command (valid tool reports, which cost two
// entries each, and requests for a route that does not exist) spends the dispatch's audit
// budget; the gateway writes one final entry, the sandbox is stopped, and the dispatch ends
// failed limit-exceeded. Its audit holds no more entries than the budget allows.
func TestModel_GatewayFloodFailsLimitExceeded(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("SKIP: curl is not installed; the flooding agent uses it to reach the gateway socket")
	}
	e := newModelEnv(t)
	e.capability("shell", "tools: [run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("flooder", "openai", "shell")
	report := `{"tool":"forged","decision":"allowed","reason":"","args_hash":"sha256:` + strings.Repeat("a", 64) + `","duration_ms":0}`
	// Two curls, each sending its requests over one connection (the URL's [1-N] range): a
	// process per request spent the budget too slowly under load to hit it before the
	// dispatch's own wall-time budget did.
	flood := `sock=/agora/gateway/gateway.sock
curl -s --unix-socket $sock "http://gw/nope?[1-300]" >/dev/null
curl -s --unix-socket $sock -d '` + report + `' "http://gw/audit/tool?[1-100000]" >/dev/null
echo FLOOD-ENDED`
	e.model(testAPIKey,
		openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", flood}, "timeout_seconds": 600})),
		openaitest.Say("flooded"),
	)
	const timeout = time.Minute // the smallest budget: 512 entries
	r := e.run(dispatch.Request{Subagent: "flooder", Envs: []string{"model"}, Timeout: timeout})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonLimitExceeded || !strings.Contains(r.Detail, "audit budget of 512 entries is spent") {
		t.Fatalf("got %s %s: %s, want failed limit-exceeded naming the gateway's audit budget", r.State, r.Reason, r.Detail)
	}
	all, err := audit.List(context.Background(), e.home.DB.SQL(), audit.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gw []audit.Record // what the gateway wrote for this dispatch
	for _, a := range all {
		if a.Subject == "dispatch/"+r.ID && strings.HasPrefix(a.Kind, "tool.") {
			gw = append(gw, a)
		}
	}
	if len(gw) > 512 {
		t.Errorf("the gateway wrote %d entries, want at most the budget's 512", len(gw))
	}
	if n := len(gw); n == 0 || gw[n-1].Kind != entry.ToolGatewayBudget {
		t.Fatalf("the gateway's last entry is not %s (%d entries)", entry.ToolGatewayBudget, n)
	}
	var budgets int
	for _, a := range gw {
		if a.Kind == entry.ToolGatewayBudget {
			budgets++
		}
	}
	if budgets != 1 {
		t.Errorf("got %d %s entries, want one", budgets, entry.ToolGatewayBudget)
	}
}
