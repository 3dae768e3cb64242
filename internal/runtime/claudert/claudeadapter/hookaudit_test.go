package claudeadapter

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/claudert"
	"github.com/agora-dev/agora/internal/secret/redact"
)

// newTestAudit is a claudeAudit reporting to a real gateway recording into a, for a grant
// covering Bash and Read and the MCP server docs, with its hook relay; stopped records the
// stop's cause.
func newTestAudit(t *testing.T, a *memAuditor) (au *claudeAudit, hooks *hookRelay, stopped *error) {
	t.Helper()
	gw := agentrun.DialGateway(startGateway(t, a))
	t.Cleanup(gw.Close)
	hooks, err := startHookRelay(gw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hooks.close)
	setPreloadFile(t, false)
	var cause error
	au = newClaudeAudit(gw, hooks, redact.New(nil), []string{"Bash", "Read"}, []string{"docs"}, func(err error) { cause = err })
	return au, hooks, &cause
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

// hookReports sends reports to the relay as claude's hooks do, each phase of call id with
// the given decision ("pre=requested", "post=allowed"), for tool and hash.
func hookReports(t *testing.T, hooks *hookRelay, id, tool, hash string, phases ...string) {
	t.Helper()
	c := agentrun.DialGateway(hooks.name)
	defer c.Close()
	for _, p := range phases {
		phase, decision, _ := strings.Cut(p, "=")
		if err := c.Report(t.Context(), agentrun.ToolReport{Tool: tool, Decision: decision, Reason: "by the hook", ArgsHash: hash, Phase: phase, CallID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClaudeAudit_Results: what the hooks did not record is reported from claude's output,
// each with its reason; what they did record is not reported twice.
func TestClaudeAudit_Results(t *testing.T) {
	a := &memAuditor{}
	au, hooks, _ := newTestAudit(t, a)
	au.Init(claudert.Init{Tools: []string{"Bash", "Read"}, PermissionMode: "dontAsk"})
	in := json.RawMessage(`{"command":"x"}`)
	h := agentrun.ArgsHash(redact.New(nil), in)
	// t1: recorded to its end by the hooks. t2: past the pre hook, refused by the rules.
	// t3: not loaded. t4: refused before any hook. t5: ran and failed, its post hook did not
	// report. t6: ran, no post hook at all. t7: refused by agora's pre hook.
	hookReports(t, hooks, "t1", "Bash", h, "pre=requested", "post=allowed")
	for _, id := range []string{"t2", "t5", "t6"} {
		hookReports(t, hooks, id, "Bash", h, "pre=requested")
	}
	hookReports(t, hooks, "t7", "Bash", h, "pre=denied")
	for _, r := range []claudert.ToolResult{
		{ID: "t1"}, {ID: "t2", IsError: true, PermissionDenied: true, Tool: "Bash"}, {ID: "t3", IsError: true, UseError: true, NoSuchTool: true},
		{ID: "t4", IsError: true, UseError: true}, {ID: "t5", IsError: true}, {ID: "t6"}, {ID: "t7", IsError: true, HookBlocked: true, Tool: "Bash"},
	} {
		au.ToolCall(claudert.ToolCall{ID: r.ID, Name: "Bash", Input: in})
		au.ToolResult(r)
	}
	if err := au.failed(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Bash requested by the hook|pre|t1|" + h,
		"Bash allowed by the hook|post|t1|" + h,
		"Bash requested by the hook|pre|t2|" + h,
		"Bash requested by the hook|pre|t5|" + h,
		"Bash requested by the hook|pre|t6|" + h,
		"Bash denied by the hook|pre|t7|" + h,
		"Bash denied " + reasonRuleDenied + "|post|t2|" + h,
		"Bash denied " + reasonNotLoaded + "|<nil>|t3|" + h,
		"Bash denied " + reasonRefused + "|<nil>|t4|" + h,
		"Bash error " + reasonFailed + "|post|t5|" + h,
		"Bash allowed " + reasonRan + "|post|t6|" + h,
	}
	if diff := cmp.Diff(want, a.Calls()); diff != "" {
		t.Errorf("tool.call records (-want +got):\n%s", diff)
	}
	// All refused by rules or hooks are in permission_denials: the run ends well.
	au.finish(t.Context(), claudert.Result{Subtype: "success", Denials: []claudert.ToolUse{{ID: "t2", Name: "Bash"}, {ID: "t7", Name: "Bash"}}}, nil)
	if err := au.failed(); err != nil {
		t.Fatal(err)
	}
}

// TestClaudeAudit_Attacks: what a process in the sandbox (or the model) can do to the
// evidence the audit is decided from, and how each ends: never with a refused call on record
// as run, nor a call that ran with no entry, and the run stopped.
func TestClaudeAudit_Attacks(t *testing.T) {
	in := json.RawMessage(`{"command":"x"}`)
	h := agentrun.ArgsHash(redact.New(nil), in)
	refused := claudert.ToolResult{ID: "t", IsError: true, PermissionDenied: true, Tool: "Bash"}
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, au *claudeAudit, hooks *hookRelay)
		calls   []claudert.ToolCall
		results []claudert.ToolResult
		finish  *claudert.Result
		wantErr string
		want    []string // the tool.call records, in order
	}{
		{
			// A forged "ran" record used to be a file in /tmp; now nothing the agent writes is
			// read, and a report through the relay that says it ran contradicts claude.
			name: "ForgedOutcomeThroughTheRelay",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=requested", "post=allowed")
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{refused},
			wantErr: "claude refused its Bash call t, but a report of it on record says otherwise",
			want:    []string{"Bash requested by the hook|pre|t|" + h, "Bash allowed by the hook|post|t|" + h},
		},
		{
			name: "ForgedOutcomeStraightToTheGateway",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=requested")
				if err := au.gw.Report(t.Context(), agentrun.ToolReport{Tool: "Bash", Decision: "allowed", Reason: "forged", ArgsHash: h, Phase: agentrun.PhasePost, CallID: "t"}); err != nil {
					t.Fatal(err)
				}
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{refused},
			wantErr: "could not be recorded in the audit log",
			want:    []string{"Bash requested by the hook|pre|t|" + h, "Bash allowed forged|post|t|" + h},
		},
		{
			name:    "RanWithoutThePreHook",
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{{ID: "t"}},
			wantErr: "without agora's pre-tool audit hook",
			want:    []string{"Bash allowed " + reasonNoPreHook + "|<nil>|t|" + h},
		},
		{
			name: "PreReportOfAnotherCall",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"ls"}`)), "pre=requested")
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{{ID: "t"}},
			wantErr: "names another call than the one claude made",
			want:    []string{"Bash requested by the hook|pre|t|" + agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{"command":"ls"}`))},
		},
		{
			name: "RanThoughRefusedOnRecord",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=denied")
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{{ID: "t"}},
			wantErr: "which is on record as refused",
			want:    []string{"Bash denied by the hook|pre|t|" + h},
		},
		{
			// The model reuses an id: the second call is put on record from its result, without
			// the id (the gateway holds the first call's), and the run stops, naming the id.
			name: "RepeatedCallID",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=requested", "post=allowed")
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}, {ID: "t", Name: "Write", Input: in}},
			results: []claudert.ToolResult{{ID: "t"}, {ID: "t", IsError: true, UseError: true, NoSuchTool: true}},
			wantErr: "the model gave a second tool call (Write) the id t of an earlier call",
			want:    []string{"Bash requested by the hook|pre|t|" + h, "Bash allowed by the hook|post|t|" + h, "Write denied " + reasonNotLoaded + "|<nil>|<nil>|" + h},
		},
		{
			// Hooks that cannot start, and a reused id: the call that ran is on record anyway.
			name: "RepeatedCallIDRanWithoutHooks",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=requested", "post=allowed")
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}, {ID: "t", Name: "Write", Input: in}},
			results: []claudert.ToolResult{{ID: "t"}, {ID: "t"}},
			wantErr: "the model gave a second tool call (Write) the id t of an earlier call",
			want:    []string{"Bash requested by the hook|pre|t|" + h, "Bash allowed by the hook|post|t|" + h, "Write allowed " + reasonNoPreHook + "|<nil>|<nil>|" + h},
		},
		{
			name: "SecondResultForOneCall",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=requested")
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{refused, {ID: "t"}},
			wantErr: "a second result for tool call t",
			want:    []string{"Bash requested by the hook|pre|t|" + h, "Bash denied " + reasonRuleDenied + "|post|t|" + h},
		},
		{
			// A tool's own output worded as claude's refusal: claude does not list the call
			// among its denials, so the refusal was not claude's.
			name: "RefusalClaudeDoesNotList",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=requested")
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{refused},
			finish:  &claudert.Result{Subtype: "success"},
			wantErr: "claude does not list it among its permission denials",
			want:    []string{"Bash requested by the hook|pre|t|" + h, "Bash denied " + reasonRuleDenied + "|post|t|" + h},
		},
		{
			name: "PreloadAppears",
			setup: func(t *testing.T, au *claudeAudit, hooks *hookRelay) {
				hookReports(t, hooks, "t", "Bash", h, "pre=requested", "post=allowed")
				setPreloadFile(t, true)
			},
			calls:   []claudert.ToolCall{{ID: "t", Name: "Bash", Input: in}},
			results: []claudert.ToolResult{{ID: "t"}},
			wantErr: "ld.so.preload exists",
			want:    []string{"Bash requested by the hook|pre|t|" + h, "Bash allowed by the hook|post|t|" + h},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &memAuditor{}
			au, hooks, stopped := newTestAudit(t, a)
			au.Init(claudert.Init{Tools: []string{"Bash", "Read"}, PermissionMode: "dontAsk"})
			if tc.setup != nil {
				tc.setup(t, au, hooks)
			}
			for _, c := range tc.calls {
				au.ToolCall(c)
			}
			for _, r := range tc.results {
				au.ToolResult(r)
			}
			if tc.finish != nil {
				au.finish(t.Context(), *tc.finish, nil)
			}
			if err := au.failed(); err == nil || !strings.Contains(err.Error(), tc.wantErr) || *stopped == nil {
				t.Errorf("got %v (stop %v), want the run stopped: %q", err, *stopped, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, a.Calls()); diff != "" {
				t.Errorf("tool.call records (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClaudeAudit_RepeatedIDStopsAfterItsResult: a repeated id holds the model back at
// once, and stops claude once that call's result is on record, so the call is not lost.
func TestClaudeAudit_RepeatedIDStopsAfterItsResult(t *testing.T) {
	au, _, stopped := newTestAudit(t, &memAuditor{})
	au.Init(claudert.Init{Tools: []string{"Bash"}, PermissionMode: "dontAsk"})
	au.ToolCall(claudert.ToolCall{ID: "t", Name: "Bash", Input: json.RawMessage(`{}`)})
	au.ToolResult(claudert.ToolResult{ID: "t", IsError: true, UseError: true})
	au.ToolCall(claudert.ToolCall{ID: "t", Name: "Bash", Input: json.RawMessage(`{}`)})
	if au.failed() == nil || *stopped != nil {
		t.Fatalf("after the repeated id: failed %v, stopped %v; want failed, not yet stopped", au.failed(), *stopped)
	}
	tr := gatedTransport{next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Error("the model was reached after a repeated id")
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}), a: au}
	// The pending result would hold the request up to settleWait; a repeated id refuses it.
	au.ToolResult(claudert.ToolResult{ID: "t", IsError: true, UseError: true})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/anthropic/v1/messages", nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Error("the relay went on after a repeated id")
	}
	if *stopped == nil {
		t.Error("claude was not stopped after the repeated call's result")
	}
}

// TestClaudeAudit_Finish: after claude exited, a refusal only its result event lists is
// reported; a call cut off while it ran stays "requested". A run without an init event
// fails: its tools were never checked.
func TestClaudeAudit_Finish(t *testing.T) {
	a := &memAuditor{}
	au, hooks, _ := newTestAudit(t, a)
	au.Init(claudert.Init{Tools: []string{"Bash"}, PermissionMode: "dontAsk"})
	in := json.RawMessage(`{}`)
	h := agentrun.ArgsHash(redact.New(nil), in)
	for _, id := range []string{"cut", "denied"} {
		au.ToolCall(claudert.ToolCall{ID: id, Name: "Bash", Input: in})
	}
	hookReports(t, hooks, "cut", "Bash", h, "pre=requested")
	au.finish(t.Context(), claudert.Result{Denials: []claudert.ToolUse{{ID: "denied", Name: "Bash"}, {ID: "lost", Name: "Read"}}}, nil)
	if err := au.failed(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Bash requested by the hook|pre|cut|" + h,
		"Bash denied " + reasonRuleDenied + "|<nil>|denied|" + h,
		"Read denied " + reasonRuleDenied + "|<nil>|lost|" + agentrun.ArgsHash(redact.New(nil), nil),
	}
	if diff := cmp.Diff(want, a.Calls()); diff != "" {
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
	a := &memAuditor{FailKind: "tool.call"}
	au, _, stopped := newTestAudit(t, a)
	au.Init(claudert.Init{Tools: []string{"Bash"}, PermissionMode: "dontAsk"})
	au.ToolCall(claudert.ToolCall{ID: "t", Name: "Write", Input: json.RawMessage(`{}`)})
	au.ToolResult(claudert.ToolResult{ID: "t", IsError: true, UseError: true, NoSuchTool: true})
	if err := au.failed(); err == nil || !strings.Contains(err.Error(), "could not be recorded") || !errors.Is(*stopped, err) {
		t.Fatalf("got %v (stop %v), want the run stopped for an unrecorded call", err, *stopped)
	}
}

// TestClaudeAudit_GateWaitsForTheRequestsResults: claude may send its next model request
// before the worker has read the results it printed; the request says which results it
// carries, and goes out only once each is on record. A result the output never showed
// stops the run.
func TestClaudeAudit_GateWaitsForTheRequestsResults(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}`
	au, hooks, _ := newTestAudit(t, &memAuditor{})
	au.Init(claudert.Init{Tools: []string{"Bash"}, PermissionMode: "dontAsk"})
	seenFirst := make(chan bool, 1)
	tr := gatedTransport{next: roundTripFunc(func(*http.Request) (*http.Response, error) {
		au.mu.Lock()
		seenFirst <- au.reported["t"] == 1
		au.mu.Unlock()
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}), a: au}
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/anthropic/v1/messages", strings.NewReader(body))
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	h := agentrun.ArgsHash(redact.New(nil), json.RawMessage(`{}`))
	hookReports(t, hooks, "t", "Bash", h, "pre=requested", "post=allowed")
	au.ToolCall(claudert.ToolCall{ID: "t", Name: "Bash", Input: json.RawMessage(`{}`)})
	au.ToolResult(claudert.ToolResult{ID: "t"})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !<-seenFirst {
		t.Error("the request reached the model before the result it carries was on record")
	}

	old := settleWait
	settleWait = 50 * time.Millisecond
	defer func() { settleWait = old }()
	never, _, _ := newTestAudit(t, &memAuditor{})
	never.Init(claudert.Init{Tools: []string{"Bash"}, PermissionMode: "dontAsk"})
	tr.a = never
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/anthropic/v1/messages", strings.NewReader(body))
	if _, err := tr.RoundTrip(req); err == nil {
		t.Error("a request carrying a result the output never showed went out")
	}
	if err := never.failed(); err == nil || !strings.Contains(err.Error(), "never showed") {
		t.Errorf("got %v, want the run stopped", err)
	}
}

// The gate reads claude's model requests as the model API does: a tool_result it would
// miss under another reading (a key twice, or one that matches only under case folding)
// refuses the request instead of letting a result it never saw settled reach the model.
func TestRequestResults_Exact(t *testing.T) {
	tests := []struct {
		body    string
		want    map[string]int
		wantErr bool
	}{
		{body: `{"messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x"},{"type":"text","text":"y"}]}],"model":"m"}`, want: map[string]int{"a": 1}},
		{body: `{"messages":[{"content":[{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"a"}]}]}`, want: map[string]int{"a": 2}},
		{body: `not json`, want: nil},
		{body: `{"messages":{}}`, want: nil},
		{body: `{"messages":[{"content":[{"type":"tool_result","tool_use_id":"a","Tool_Use_ID":"b"}]}]}`, wantErr: true},
		{body: `{"messages":[{"content":[{"type":"tool_result","TOOL_USE_ID":"b"}]}]}`, wantErr: true},
		{body: `{"messages":[{"content":[{"Type":"tool_result","tool_use_id":"b"}]}]}`, wantErr: true},
		{body: `{"Messages":[{"content":[{"type":"tool_result","tool_use_id":"b"}]}]}`, wantErr: true},
		{body: `{"messages":[],"messages":[{"content":[{"type":"tool_result","tool_use_id":"b"}]}]}`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := requestResults([]byte(tt.body))
		if (err != nil) != tt.wantErr || (!tt.wantErr && !maps.Equal(got, tt.want)) {
			t.Errorf("requestResults(%s) = %v, %v; want %v, error %v", tt.body, got, err, tt.want, tt.wantErr)
		}
	}
}
