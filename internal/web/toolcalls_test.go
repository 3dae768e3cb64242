package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/modelgw"
)

// TestServer_ToolCallDecisionsShownAsRecorded: a dispatch page's tool-call table shows each
// decision as the gateway recorded it, ran-outside-grant (an action codex had started outside
// the grant) marked as the failure it is, like denied, and never as a refusal
// or an allowed call.
func TestServer_ToolCallDecisionsShownAsRecorded(t *testing.T) {
	now := time.Now()
	call := func(tool, decision, reason string) audit.Entry {
		return audit.Entry{Actor: "dispatch/d1 coder@sha256:ab", Kind: entry.ToolCall, Subject: "dispatch/d1",
			Details: map[string]any{"dispatch": "d1", "tool": tool, "decision": decision, "reason": reason}}
	}
	e := startWith(t, Sources{Orch: newFakeOrch(), MainLog: auditDB(t, "agora.db",
		call("exec_command", "allowed", "command matches a granted pattern"),
		call("exec_command", "denied", "command matches no granted pattern; refused before it ran"),
		call("apply_patch", modelgw.DecisionRanOutsideGrant, "a changed file is outside the workspace; codex had already started it")),
		Dispatches: fakeDispatches{map[string]*dispatch.Record{"d1": {ID: "d1", State: lifecycle.DispatchFailed, Subagent: "coder",
			CreatedAt: now, EndedAt: &now, Reason: "worker-failed"}}}})
	page := fetch(t, e, opToken, "/dispatches/d1")
	for _, want := range []string{
		`<td>exec_command</td><td class="dec-allowed">allowed</td>`,
		`<td>exec_command</td><td class="dec-denied">denied</td>`,
		`<td>apply_patch</td><td class="dec-ran-outside-grant">ran-outside-grant</td><td>a changed file is outside the workspace; codex had already started it</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the dispatch page lacks %s", want)
		}
	}
	resp, err := http.Get(e.base + "/static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	css, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(css), ".dec-ran-outside-grant{") && !strings.Contains(string(css), ",.dec-ran-outside-grant{") {
		t.Error("app.css does not style ran-outside-grant")
	}
}
