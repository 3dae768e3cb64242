package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/mcpserver"
)

var tester = mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingOrchestrate}

// TestTools_SchemasAndAnnotations lists the tools through a client and checks what every
// client is told: closed object schemas, and all four hints stated (the spec's defaults for
// destructiveHint and openWorldHint are true, so they are never left out).
func TestTools_SchemasAndAnnotations(t *testing.T) {
	type hints struct{ ReadOnly, Destructive, Idempotent, OpenWorld bool }
	want := map[string]hints{
		"agora_capabilities_list":   {true, false, true, false},
		"agora_subagents_list":      {true, false, true, false},
		"agora_envs_list":           {true, false, true, false},
		"agora_dispatch":            {false, false, false, true},
		"agora_dispatch_describe":   {true, false, true, false},
		"agora_dispatch_cancel":     {false, true, true, false},
		"agora_orchestrator_submit": {false, false, false, true},
		"agora_orchestrator_status": {true, false, true, false},
		"agora_orchestrator_watch":  {true, false, true, false},

		"agora_orchestrator_schedules_list": {true, false, true, false},
		"agora_orchestrator_schedule_show":  {true, false, true, false},
	}
	cs := stdioSession(t, newHome(t))
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]hints{}
	for _, tl := range res.Tools {
		t.Run(tl.Name, func(t *testing.T) {
			schema, ok := tl.InputSchema.(map[string]any)
			if !ok {
				t.Fatalf("inputSchema is %T", tl.InputSchema)
			}
			if schema["type"] != "object" || schema["additionalProperties"] != false {
				t.Errorf("inputSchema is not a closed object: type=%v additionalProperties=%v", schema["type"], schema["additionalProperties"])
			}
			props, _ := schema["properties"].(map[string]any)
			for name, p := range props {
				if typ, _ := p.(map[string]any)["type"].(string); typ == "" {
					t.Errorf("property %q has no type", name)
				}
			}
			for _, banned := range []string{"repo", "image", "secret", "secrets", "callback", "callback_url", "capabilities", "sandbox", "network", "command"} {
				if _, ok := props[banned]; ok {
					t.Errorf("argument %q shapes the worker; it must not exist", banned)
				}
			}
			a := tl.Annotations
			if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
				t.Fatalf("annotations leave a hint to its default: %+v", a)
			}
			if tl.Description == "" {
				t.Error("no description")
			}
			got[tl.Name] = hints{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}
		})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

func TestServer_ListsAreMetadataOnly(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := newFixture()
	f.cat[catalog.KindCapability] = []catalog.Version{{Kind: catalog.KindCapability, Name: "shell", Digest: digest.Digest("sha256:" + hex64),
		RegisteredAt: at, RegisteredBy: "alice", Meta: catalog.Meta{Description: "a shell", FileCount: 3,
			CapabilityDoc: &catalog.CapabilityDoc{Set: grant.Set{Commands: []string{"sh -c *"}}}, AllowedCredentialPatterns: []string{"aws"}}}}
	f.cat[catalog.KindSubagent] = []catalog.Version{{Kind: catalog.KindSubagent, Name: "writer", Digest: digest.Digest("sha256:" + hex64),
		RegisteredAt: at, Meta: catalog.Meta{Description: "writes", Runtime: "exec", Model: "m1",
			Capabilities: []catalog.Pin{{Name: "shell", Digest: digest.Digest("sha256:" + hex64)}}}}}
	f.cat[catalog.KindEnv] = []catalog.Version{{Kind: catalog.KindEnv, Name: "demo", Digest: digest.Digest("sha256:" + hex64),
		RegisteredAt: at, Meta: catalog.Meta{ValueKeys: []string{"GREETING"}, SecretKeys: []string{"TOKEN"}}},
		{Kind: catalog.KindEnv, Name: "empty", Digest: digest.Digest("sha256:" + hex64), RegisteredAt: at}}
	cs := f.stdio(t, tester, mcpserver.Limits{})
	base := map[string]any{"digest": "sha256:" + hex64, "registered_at": "2026-01-02T03:04:05Z"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		tool string
		want map[string]any
	}{
		{"agora_capabilities_list", map[string]any{"capabilities": []any{with("name", "shell", "description", "a shell")}}},
		{"agora_subagents_list", map[string]any{"subagents": []any{with("name", "writer", "description", "writes",
			"runtime", "exec", "capabilities", []any{map[string]any{"name": "shell", "digest": "sha256:" + hex64}})}}},
		{"agora_envs_list", map[string]any{"envs": []any{
			with("name", "demo", "description", "", "value_keys", []any{"GREETING"}, "secret_keys", []any{"TOKEN"}),
			with("name", "empty", "description", "", "value_keys", []any{}, "secret_keys", []any{}),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			var got map[string]any
			decode(t, call(t, cs, tt.tool, nil), &got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.tool, diff)
			}
		})
	}
}

func TestServer_DispatchWaitsThenReturns(t *testing.T) {
	tests := []struct {
		name      string
		args      map[string]any
		polls     int // Get calls before the record is finished
		wantState string
		wantNote  bool
	}{
		{"finishes within the wait", map[string]any{"subagent": "writer", "wait_seconds": 10}, 2, "finished", false},
		{"wait zero returns at once", map[string]any{"subagent": "writer", "wait_seconds": 0}, 1000, "started", true},
		{"wait ends first", map[string]any{"subagent": "writer", "wait_seconds": 1}, 1000, "started", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			var got mcpserver.DispatchRequest
			var polls atomic.Int32
			f.disp.dispatch = func(_ context.Context, r mcpserver.DispatchRequest) (*mcpserver.Record, error) {
				got = r
				return record(dispatchID, "started"), nil
			}
			f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
				if int(polls.Add(1)) >= tt.polls {
					return record(id, "finished"), nil
				}
				return record(id, "started"), nil
			}
			cs := f.stdio(t, tester, mcpserver.Limits{})
			var out struct {
				Dispatch mcpserver.Record `json:"dispatch"`
				Note     string           `json:"note"`
			}
			decode(t, call(t, cs, "agora_dispatch", tt.args), &out)
			if out.Dispatch.State != tt.wantState || (out.Note != "") != tt.wantNote {
				t.Errorf("got state %q note %q, want state %q note %v", out.Dispatch.State, out.Note, tt.wantState, tt.wantNote)
			}
			if got.Actor != "mcp:tester" || got.Subagent != "writer" {
				t.Errorf("request = %+v, want actor mcp:tester and subagent writer", got)
			}
		})
	}
}

func TestServer_DispatchPassesOnlyWhatWasAsked(t *testing.T) {
	f := newFixture()
	var got mcpserver.DispatchRequest
	f.disp.dispatch = func(_ context.Context, r mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		got = r
		return record(dispatchID, "finished"), nil
	}
	cs := f.stdio(t, tester, mcpserver.Limits{})
	res := call(t, cs, "agora_dispatch", map[string]any{
		"subagent": "writer@sha256:" + hex64, "envs": []string{"demo", "other@sha256:" + hex64},
		"target": "local", "input": map[string]any{"n": 1}, "timeout_seconds": 90,
	})
	if res.IsError {
		t.Fatal(text(res))
	}
	want := mcpserver.DispatchRequest{Subagent: "writer@sha256:" + hex64, Envs: []string{"demo", "other@sha256:" + hex64},
		Target: "local", Input: []byte(`{"n":1}`), Timeout: 90 * time.Second, Actor: "mcp:tester"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dispatch request (-want +got):\n%s", diff)
	}
}

func TestServer_ArgumentsAreRefusedAndAudited(t *testing.T) {
	tests := []struct {
		tool string
		args string
		want string
	}{
		{"agora_dispatch", `{"subagent":"writer","repo":"/home/alice/src"}`, `unknown argument "repo"`},
		{"agora_dispatch", `{"subagent":"writer","image":"evil:latest"}`, `unknown argument "image"`},
		{"agora_dispatch", `{"subagent":"writer","callback_url":"http://x"}`, `unknown argument "callback_url"`},
		{"agora_dispatch", `{"Subagent":"writer"}`, `unknown argument "Subagent"`},
		{"agora_dispatch", `{"subagent":"writer","subagent":"rogue"}`, `argument "subagent" appears twice`},
		{"agora_dispatch", `{"subagent":"writer","envs":null}`, `argument "envs" may not be null`},
		{"agora_dispatch", `{}`, `argument "subagent" is required`},
		{"agora_dispatch", `{"subagent":"../../etc"}`, `not NAME or NAME@sha256:HEX`},
		{"agora_dispatch", `{"subagent":"writer","wait_seconds":301}`, `"wait_seconds" must be between 0 and 300`},
		{"agora_dispatch", `{"subagent":"writer","timeout_seconds":0}`, `"timeout_seconds" must be between 1 and 86400`},
		{"agora_dispatch", `{"subagent":"writer","timeout_seconds":"10"}`, `"timeout_seconds" has the wrong type (got string)`},
		{"agora_dispatch", `{"subagent":"writer","input":[1]}`, `"input" must be a JSON object`},
		{"agora_dispatch", `{"subagent":"writer","envs":["a","a"]}`, `names "a" twice`},
		{"agora_dispatch_describe", `{"id":"../x"}`, `not a dispatch id`},
		{"agora_capabilities_list", `{"all":true}`, `this tool takes no arguments`},
		{"agora_orchestrator_submit", `{"plan":"tasks: []"}`, `"plan" must be a JSON object`},
		{"agora_orchestrator_watch", `{"run_id":"r1","timeout_seconds":3600}`, `between 1 and 300`},
	}
	for _, tt := range tests {
		t.Run(tt.tool+tt.args, func(t *testing.T) {
			f := newFixture()
			cs := f.stdio(t, tester, mcpserver.Limits{})
			res := call(t, cs, tt.tool, rawArgs(tt.args))
			if !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Fatalf("got error=%v %q, want an error containing %q", res.IsError, text(res), tt.want)
			}
			if strings.Contains(text(res), "/home/alice") {
				t.Errorf("the error echoes a value: %q", text(res))
			}
			es := f.audit.all()
			if len(es) != 1 || es[0].Kind != entry.MCPToolCall || es[0].Details["decision"] != "invalid" {
				t.Errorf("audit = %+v, want one mcp.tool.call entry with decision invalid", es)
			}
		})
	}
}

// rawArgs sends arguments exactly as written.
type rawArgs string

func (r rawArgs) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestServer_ErrorsAreOneSentenceWithoutPaths(t *testing.T) {
	stack := "open /home/alice/.local/share/agora/blobs/sha256/ab/cd: permission denied\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:12"
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"request refused", &mcpserver.RequestError{Msg: `subagent "nobody" not found; known: writer`},
			`agora_dispatch refused: subagent "nobody" not found; known: writer`},
		{"request refused with a path", &mcpserver.RequestError{Msg: "repository /home/alice/src/app is not a directory"},
			`agora_dispatch refused: repository <path> is not a directory`},
		{"internal", errors.New(stack),
			"agora_dispatch could not complete because of an internal error; the server log has the details"},
		{"cancelled", fmt.Errorf("wait: %w", context.Canceled), "agora_dispatch was cancelled before it completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			f.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) { return nil, tt.err }
			cs := f.stdio(t, tester, mcpserver.Limits{})
			res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer"})
			if !res.IsError || text(res) != tt.want {
				t.Errorf("got error=%v %q, want %q", res.IsError, text(res), tt.want)
			}
		})
	}
	t.Run("not found", func(t *testing.T) {
		f := newFixture()
		f.disp.get = func(context.Context, string) (*mcpserver.Record, error) {
			return nil, fmt.Errorf("dispatch %s in /var/lib/agora/agora.db: %w", dispatchID, mcpserver.ErrNotFound)
		}
		cs := f.stdio(t, tester, mcpserver.Limits{})
		res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID})
		if want := `dispatch "` + dispatchID + `" not found`; !res.IsError || text(res) != want {
			t.Errorf("got %q, want %q", text(res), want)
		}
	})
	t.Run("record detail", func(t *testing.T) {
		f := newFixture()
		f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
			r := record(id, "failed")
			r.Detail = "load pinned catalog content: open /home/alice/.local/share/agora/blobs/x/y: no such file"
			return r, nil
		}
		cs := f.stdio(t, tester, mcpserver.Limits{})
		var out struct{ Dispatch mcpserver.Record }
		decode(t, call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID}), &out)
		if want := "load pinned catalog content: open <path>: no such file"; out.Dispatch.Detail != want {
			t.Errorf("detail = %q, want %q", out.Dispatch.Detail, want)
		}
	})
}

func TestServer_Orchestrator(t *testing.T) {
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"agora_orchestrator_submit", map[string]any{"plan": map[string]any{"tasks": []any{}}}},
		{"agora_orchestrator_status", map[string]any{"run_id": "run-1"}},
		{"agora_orchestrator_watch", map[string]any{"run_id": "run-1", "timeout_seconds": 1}},
	}
	t.Run("not running", func(t *testing.T) {
		cs := newFixture().stdio(t, tester, mcpserver.Limits{})
		for _, c := range calls {
			res := call(t, cs, c.tool, c.args)
			if want := "orchestrator not running: start it with `agora orch serve`"; !res.IsError || text(res) != want {
				t.Errorf("%s: got %q, want %q", c.tool, text(res), want)
			}
		}
	})
	t.Run("running", func(t *testing.T) {
		f := newFixture()
		o := &fakeOrchestrator{}
		f.orch = o
		cs := f.stdio(t, tester, mcpserver.Limits{})
		for _, c := range calls {
			var out struct{ Run map[string]any }
			decode(t, call(t, cs, c.tool, c.args), &out)
			if out.Run["id"] != "run-1" {
				t.Errorf("%s: run = %v", c.tool, out.Run)
			}
		}
		if o.actor != "mcp:tester" || string(o.submitted) != `{"tasks":[]}` {
			t.Errorf("submitted %s as %q", o.submitted, o.actor)
		}
		res := call(t, cs, "agora_orchestrator_status", map[string]any{"run_id": "nope"})
		if want := `run "nope" not found`; text(res) != want {
			t.Errorf("got %q, want %q", text(res), want)
		}
	})
}

func TestServer_AuditsEveryCallBeforeItRuns(t *testing.T) {
	f := newFixture()
	var dispatched atomic.Int32
	f.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		dispatched.Add(1)
		return record(dispatchID, "finished"), nil
	}
	cs := f.stdio(t, tester, mcpserver.Limits{})
	call(t, cs, "agora_dispatch", rawArgs(`{"subagent":"writer","input":{"b":2,"a":1}}`))
	call(t, cs, "agora_dispatch", rawArgs(`{ "input": {"a":1, "b":2}, "subagent": "writer" }`))
	call(t, cs, "agora_capabilities_list", nil)
	es := f.audit.all()
	if len(es) != 3 {
		t.Fatalf("%d audit entries, want 3: %+v", len(es), es)
	}
	for _, e := range es {
		if e.Actor != "tester" || e.Kind != entry.MCPToolCall || e.Details["decision"] != "allowed" || e.Details["args_form"] != "jcs" {
			t.Errorf("entry %+v", e)
		}
	}
	if es[0].Details["args_sha256"] != es[1].Details["args_sha256"] {
		t.Error("equal arguments spelled differently hash differently")
	}
	if es[0].Details["args_sha256"] == es[2].Details["args_sha256"] || es[0].Subject != "mcp/agora_dispatch" {
		t.Errorf("entries %+v", es)
	}

	f.audit.fail = errors.New("disk full")
	res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer"})
	if want := "agora_dispatch refused: the audit log could not record this call"; text(res) != want {
		t.Errorf("got %q, want %q", text(res), want)
	}
	if dispatched.Load() != 2 {
		t.Errorf("dispatched %d times, want 2: an unaudited call ran", dispatched.Load())
	}
}

func TestServer_StdioCeiling(t *testing.T) {
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "finished"), nil }
	cs := f.stdio(t, mcpserver.Principal{Client: "bob", Ceiling: mcpserver.CeilingRead}, mcpserver.Limits{})
	got := toolNames(t, cs)
	slices.Sort(got)
	want := []string{"agora_capabilities_list", "agora_dispatch_describe", "agora_envs_list", "agora_orchestrator_schedule_show",
		"agora_orchestrator_schedules_list", "agora_orchestrator_status", "agora_orchestrator_watch", "agora_subagents_list"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a read client's tools (-want +got):\n%s", diff)
	}
	res := call(t, cs, "agora_dispatch_cancel", map[string]any{"id": dispatchID})
	if want := `client "bob" may not call agora_dispatch_cancel: its ceiling is read, and agora_dispatch_cancel needs dispatch`; text(res) != want {
		t.Errorf("got %q, want %q", text(res), want)
	}
	if res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID}); res.IsError {
		t.Errorf("describe: %s", text(res))
	}
	es := f.audit.all()
	if len(es) != 2 || es[0].Kind != entry.MCPToolDenied || es[0].Actor != "bob" || es[0].Details["tool"] != "agora_dispatch_cancel" ||
		es[0].Details["ceiling"] != "read" || es[1].Kind != entry.MCPToolCall {
		t.Errorf("audit = %+v", es)
	}
}

func TestServer_StdioRateLimit(t *testing.T) {
	cs := newFixture().stdio(t, tester, mcpserver.Limits{Rate: 0.01, Burst: 2})
	var limited int
	for range 4 {
		if res := call(t, cs, "agora_capabilities_list", nil); res.IsError {
			if !strings.Contains(text(res), "too many calls") {
				t.Fatalf("unexpected error %q", text(res))
			}
			limited++
		}
	}
	if limited != 2 {
		t.Errorf("%d of 4 calls limited, want 2 (burst 2)", limited)
	}
}

// TestServer_UnknownToolIsRefusedAndAudited: calling a tool that does not exist (an AI trying
// a privileged verb) is a protocol error, and a denial in the audit log.
func TestServer_UnknownToolIsRefusedAndAudited(t *testing.T) {
	f := newFixture()
	cs := f.stdio(t, tester, mcpserver.Limits{})
	for _, name := range []string{"agora_capability_register", "agora_orchestrator_cancel", "bad name\n"} {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"name": "x"}})
		if err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("%s: err = %v, want unknown tool", name, err)
		}
	}
	var got []string
	for _, e := range f.audit.all() {
		got = append(got, e.Kind+" "+e.Subject+" "+e.Details["decision"].(string))
	}
	want := []string{"mcp.tool.denied mcp/agora_capability_register unknown-tool", "mcp.tool.denied mcp/agora_orchestrator_cancel unknown-tool",
		"mcp.tool.denied mcp/(not a tool name) unknown-tool"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}
