package worker

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// newTestAudit is a claudeAudit reporting to a real gateway recording into a, for a grant
// covering Bash and Read and the MCP server docs; stopped records the stop's cause.
func newTestAudit(t *testing.T, a *memAuditor) (au *claudeAudit, marks string, stopped *error) {
	t.Helper()
	gw := dialGateway(startGateway(t, a))
	t.Cleanup(gw.close)
	marks = t.TempDir()
	var cause error
	au = newClaudeAudit(gw, marks, redact.New(nil), []string{"Bash", "Read"}, []string{"docs"}, func(err error) { cause = err })
	return au, marks, &cause
}

// TestClaudeAudit_Init: claude must have loaded only tools the grant covers (an MCP server's
// tools count when the server is granted) and run in the dontAsk mode; else it is stopped
// and the relay refuses to reach the model for it.
func TestClaudeAudit_Init(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      claudert.Init
		wantErr string
	}{
		{"Covered", claudert.Init{Tools: []string{"Bash", "Read", "mcp__docs__search"}, PermissionMode: "dontAsk"}, ""},
		{"Nothing", claudert.Init{Tools: []string{}, PermissionMode: "dontAsk"}, ""},
		{"Ungranted", claudert.Init{Tools: []string{"Read", "Write"}, PermissionMode: "dontAsk"}, `claude loaded tool "Write", which the grant does not cover`},
		{"OtherServer", claudert.Init{Tools: []string{"mcp__docs2__x"}, PermissionMode: "dontAsk"}, `claude loaded tool "mcp__docs2__x"`},
		{"ServerPrefixOnly", claudert.Init{Tools: []string{"mcp__docs"}, PermissionMode: "dontAsk"}, `claude loaded tool "mcp__docs"`},
		{"Mode", claudert.Init{Tools: []string{"Read"}, PermissionMode: "bypassPermissions"}, `permission mode "bypassPermissions", not "dontAsk"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			au, _, stopped := newTestAudit(t, &memAuditor{})
			au.Init(tc.in)
			err := au.failed()
			if tc.wantErr == "" {
				if err != nil || *stopped != nil {
					t.Fatalf("got %v (stop %v), want none", err, *stopped)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) || *stopped == nil {
				t.Fatalf("got %v (stop %v), want %q", err, *stopped, tc.wantErr)
			}
			// The relay's requests wait for this verdict, then go on only when it is good.
			called := false
			tr := gatedTransport{next: roundTripFunc(func(*http.Request) (*http.Response, error) {
				called = true
				return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
			}), a: au}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/anthropic/v1/messages", nil)
			_, rerr := tr.RoundTrip(req)
			if called != (tc.wantErr == "") || (rerr == nil) != (tc.wantErr == "") {
				t.Errorf("relay reached the model: %t (err %v)", called, rerr)
			}
		})
	}
}

// recordPre records call id's pre report "requested" at the gateway, as the pre-tool hook
// does: the gateway admits a post report only after it.
func recordPre(t *testing.T, au *claudeAudit, id, hash string) {
	t.Helper()
	pre := toolReport{Tool: "Bash", Decision: decisionRequested, Reason: reasonRequested, ArgsHash: hash, Phase: phasePre, CallID: id}
	if err := au.gw.report(t.Context(), pre); err != nil {
		t.Fatal(err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClaudeAudit_Results: what the hooks did not record is reported from claude's output,
// each with its reason; what they did record is not reported twice.
func TestClaudeAudit_Results(t *testing.T) {
	a := &memAuditor{}
	au, marks, _ := newTestAudit(t, a)
	au.Init(claudert.Init{Tools: []string{"Bash", "Read"}, PermissionMode: "dontAsk"})
	in := json.RawMessage(`{"command":"x"}`)
	h := argsHash(redact.New(nil), in)
	mark := func(id, kind, content string) {
		if err := writeMark(marks, id, kind, content); err != nil {
			t.Fatal(err)
		}
		if kind == markPre && content == decisionRequested && id != "t1" {
			recordPre(t, au, id, h) // as the hook does before its mark
		}
	}
	// t1: recorded to its end by the hooks. t2: past the pre hook, refused by the rules.
	// t3: not loaded. t4: refused before any hook. t5: ran, its post hook could not report.
	// t6: ran, no post hook at all. t7: refused by agora's pre hook.
	mark("t1", markPre, decisionRequested)
	mark("t1", markRan, "allowed\n"+reasonRan)
	mark("t1", markPost, "allowed")
	mark("t2", markPre, decisionRequested)
	mark("t5", markPre, decisionRequested)
	mark("t5", markRan, "error\n"+reasonFailed)
	mark("t6", markPre, decisionRequested)
	mark("t7", markPre, "denied")
	for _, r := range []claudert.ToolResult{
		{ID: "t1"}, {ID: "t2", IsError: true}, {ID: "t3", IsError: true, UseError: true, NoSuchTool: true},
		{ID: "t4", IsError: true, UseError: true}, {ID: "t5", IsError: true}, {ID: "t6"}, {ID: "t7", IsError: true},
	} {
		au.ToolCall(claudert.ToolCall{ID: r.ID, Name: "Bash", Input: in})
		au.ToolResult(r)
		au.ToolResult(r) // a repeat changes nothing
	}
	if err := au.failed(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Bash requested " + reasonRequested + "|pre|t2|" + h,
		"Bash requested " + reasonRequested + "|pre|t5|" + h,
		"Bash requested " + reasonRequested + "|pre|t6|" + h,
		"Bash denied " + reasonRuleDenied + "|post|t2|" + h,
		"Bash denied " + reasonNotLoaded + "|<nil>|t3|" + h,
		"Bash denied " + reasonRefused + "|<nil>|t4|" + h,
		"Bash error " + reasonFailed + "|post|t5|" + h,
		"Bash allowed " + reasonRan + "|post|t6|" + h,
	}
	if diff := cmp.Diff(want, a.calls()); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}
}

// TestClaudeAudit_Finish: after claude exited, a refusal only its result event lists, and an
// outcome a hook marked but could not report, are reported; a call cut off while it ran
// stays "requested". A run without an init event fails: its tools were never checked.
func TestClaudeAudit_Finish(t *testing.T) {
	a := &memAuditor{}
	au, marks, _ := newTestAudit(t, a)
	au.Init(claudert.Init{Tools: []string{"Bash"}, PermissionMode: "dontAsk"})
	in := json.RawMessage(`{}`)
	h := argsHash(redact.New(nil), in)
	for _, id := range []string{"cut", "ran", "denied"} {
		au.ToolCall(claudert.ToolCall{ID: id, Name: "Bash", Input: in})
	}
	for _, id := range []string{"cut", "ran"} {
		recordPre(t, au, id, h) // as the hook does before its mark
		if err := writeMark(marks, id, markPre, decisionRequested); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeMark(marks, "ran", markRan, "allowed\n"+reasonRan); err != nil {
		t.Fatal(err)
	}
	au.finish(t.Context(), claudert.Result{Denials: []claudert.ToolUse{{ID: "denied", Name: "Bash"}, {ID: "lost", Name: "Read"}}}, nil)
	if err := au.failed(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Bash requested " + reasonRequested + "|pre|cut|" + h,
		"Bash requested " + reasonRequested + "|pre|ran|" + h,
		"Bash denied " + reasonRuleDenied + "|<nil>|denied|" + h,
		"Read denied " + reasonRuleDenied + "|<nil>|lost|" + argsHash(redact.New(nil), nil),
		"Bash allowed " + reasonRan + "|post|ran|" + h,
	}
	if diff := cmp.Diff(want, a.calls()); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}

	noInit, _, _ := newTestAudit(t, &memAuditor{})
	noInit.finish(t.Context(), claudert.Result{Subtype: "success"}, nil)
	if err := noInit.failed(); err == nil || !strings.Contains(err.Error(), "no init event") {
		t.Errorf("a run without an init event: got %v", err)
	}
	early, _, _ := newTestAudit(t, &memAuditor{})
	early.ToolCall(claudert.ToolCall{ID: "x", Name: "Bash"})
	if err := early.failed(); err == nil || !strings.Contains(err.Error(), "before its init event") {
		t.Errorf("a call before the init event: got %v", err)
	}
}

// TestClaudeAudit_ReportFailureStops: a result the audit log does not keep stops the run.
func TestClaudeAudit_ReportFailureStops(t *testing.T) {
	a := &memAuditor{failKind: "tool.call"}
	au, _, stopped := newTestAudit(t, a)
	au.Init(claudert.Init{Tools: []string{"Bash"}, PermissionMode: "dontAsk"})
	au.ToolCall(claudert.ToolCall{ID: "t", Name: "Write", Input: json.RawMessage(`{}`)})
	au.ToolResult(claudert.ToolResult{ID: "t", IsError: true, UseError: true, NoSuchTool: true})
	if err := au.failed(); err == nil || !strings.Contains(err.Error(), "could not be recorded") || !errors.Is(*stopped, err) {
		t.Fatalf("got %v (stop %v), want the run stopped for an unrecorded call", err, *stopped)
	}
}
