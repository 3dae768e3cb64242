package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// atLimit is an input of exactly wire.MaxInputJSON bytes of canonical JSON.
var atLimit = `{"big":"` + strings.Repeat("x", wire.MaxInputJSON-len(`{"big":""}`)) + `"}`

func findTool(t testing.TB, name string) tool {
	t.Helper()
	for _, tl := range tools() {
		if tl.name == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return tool{}
}

func TestDecodeArgs(t *testing.T) {
	ref := "writer@sha256:" + strings.Repeat("a", 64)
	tests := []struct {
		tool, raw string
		want      any    // the decoded value when accepted
		err       string // a substring of the refusal otherwise
	}{
		{"agora_capabilities_list", ``, noArgs{}, ""},
		{"agora_capabilities_list", `null`, noArgs{}, ""},
		{"agora_capabilities_list", ` {} `, noArgs{}, ""},
		{"agora_capabilities_list", `[]`, nil, "must be a JSON object"},
		{"agora_capabilities_list", `{} {}`, nil, "not valid JSON"},
		{"agora_capabilities_list", `{"a":1`, nil, "not valid JSON"},
		{"agora_capabilities_list", "{\"\xff\":1}", nil, "not valid UTF-8"},
		{"agora_dispatch", `{"subagent":"` + ref + `","wait_seconds":0}`, dispatchArgs{Subagent: ptr(ref), WaitSeconds: ptr[int64](0)}, ""},
		{"agora_dispatch", `{"subagent":"w","input":{"k":[1,{"x":null}]},"envs":[]}`,
			dispatchArgs{Subagent: ptr("w"), Envs: []string{}, Input: json.RawMessage(`{"k":[1,{"x":null}]}`)}, ""},
		{"agora_dispatch", `{"sub\u0061gent":"w"}`, dispatchArgs{Subagent: ptr("w")}, ""},
		{"agora_dispatch", `{"subagent":"w","sub\u0061gent":"x"}`, nil, "appears twice"},
		{"agora_dispatch", `{"SUBAGENT":"w"}`, nil, `unknown argument "SUBAGENT"`},
		{"agora_dispatch", `{"subagent":"w","` + strings.Repeat("k", 100) + `":1}`, nil, `"` + strings.Repeat("k", 64) + `"...`},
		{"agora_dispatch", `{"subagent":"W"}`, nil, "not NAME or NAME@sha256:HEX"},
		{"agora_dispatch", `{"subagent":"w@sha256:ABC"}`, nil, "not NAME or NAME@sha256:HEX"},
		{"agora_dispatch", `{"subagent":"w","target":"a b"}`, nil, "not a target name"},
		{"agora_dispatch", `{"subagent":"w","target":""}`, nil, `"target" is empty; omit it for the default target`},
		{"agora_dispatch", `{"subagent":"w","target":"local"}`, dispatchArgs{Subagent: ptr("w"), Target: ptr("local")}, ""},
		{"agora_dispatch", `{"subagent":"w","timeout_seconds":1.5}`, nil, `"timeout_seconds" has the wrong type (got number)`},
		{"agora_dispatch", `{"subagent":"w","timeout_seconds":1e400}`, nil, "wrong type"},
		{"agora_dispatch", `{"subagent":"w","envs":"demo"}`, nil, `"envs" has the wrong type (got string)`},
		{"agora_dispatch", `{"subagent":"w","envs":[` + strings.Repeat(`"e",`, 16) + `"f"]}`, nil, "at most 16"},
		{"agora_dispatch", `{"subagent":"w","input":"{}"}`, nil, `"input" must be a JSON object`},
		{"agora_dispatch", `{"subagent":"w","input":{"big":"` + strings.Repeat("x", wire.MaxInputJSON-len(`{"big":""}`)+1) + `"}}`, nil, "over the limit of 122880 bytes of canonical JSON"},
		{"agora_dispatch", `{"subagent":"w","input":` + atLimit + `}`, dispatchArgs{Subagent: ptr("w"), Input: json.RawMessage(atLimit)}, ""},
		{"agora_dispatch", `{"subagent":"w","workspace":"app","revision":"release/1"}`, dispatchArgs{Subagent: ptr("w"), Workspace: ptr("app"), Revision: ptr("release/1")}, ""},
		{"agora_dispatch", `{"subagent":"w","workspace":"app","revision":"main~1"}`, nil, `"revision" is not a branch, tag or full commit id`},
		{"agora_dispatch", `{"subagent":"w","workspace":"app","revision":"HEAD"}`, nil, `"revision" is not a branch, tag or full commit id: no revision syntax`},
		{"agora_dispatch", `{"subagent":"w","workspace":"app","revision":"-x"}`, nil, `"revision" is not a branch, tag or full commit id`},
		{"agora_dispatch", `{"subagent":"w","revision":"main"}`, nil, `"revision" needs a workspace`},
		{"agora_dispatch", `{"subagent":"w","workspace":"/srv/app"}`, nil, `"workspace" holds a reference that is not NAME`},
		{"agora_dispatch", `{"subagent":"w","input":{"a":1.5}}`, nil, `"input" has no canonical JSON form`},
		{"agora_dispatch", `{"subagent":"w","pad":"` + strings.Repeat("x", maxArgsBytes) + `"}`, nil, "over the 2097152-byte limit"},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"blue"},"wait_seconds":5}`,
			dispatchArgs{Resume: &resumeArgs{Dispatch: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Answer: "blue"}, WaitSeconds: ptr[int64](5)}, ""},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"blue"},"subagent":"w"}`, nil, "give only resume and wait_seconds"},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"blue"},"input":{}}`, nil, "give only resume and wait_seconds"},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"blue"},"workspace":"app"}`, nil, "give only resume and wait_seconds"},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"blue","actor":"root"}}`, nil, `unknown argument "actor"`},
		{"agora_dispatch", `{"resume":{"dispatch":"../01ARZ3NDEKTSV4RRFFQ69G5F","answer":"blue"}}`, nil, `"resume.dispatch" is not a dispatch id`},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"  \n"}}`, nil, `"resume.answer" is empty`},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"` + strings.Repeat("x", maxAnswer+1) + `"}}`, nil, "at most 16384 bytes"},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV"}}`, nil, `"resume.answer" is empty`},
		{"agora_dispatch", `{"resume":{"DISPATCH":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"blue"}}`, nil, `unknown argument "DISPATCH"`},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAW","answer":"blue"}}`, nil, `"dispatch" appears twice`},
		{"agora_dispatch", `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":null}}`, nil, `"answer" may not be null`},
		{"agora_dispatch", `{"resume":"01ARZ3NDEKTSV4RRFFQ69G5FAV"}`, nil, `"resume" must be an object`},
		{"agora_dispatch", `{"resume":{"dispatch":7,"answer":"blue"}}`, nil, `wrong type`},
		{"agora_dispatch", `{"resume":null}`, nil, "null"},
		{"agora_dispatch_cancel", `{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV"}`, idArgs{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, ""},
		{"agora_dispatch_cancel", `{"id":"01arz3ndektsv4rrffq69g5fav"}`, nil, "not a dispatch id"},
		{"agora_orchestrator_submit", `{"plan":{}}`, submitArgs{Plan: json.RawMessage(`{}`)}, ""},
		{"agora_orchestrator_submit", `{}`, nil, `"plan" is required`},
		{"agora_orchestrator_status", `{"run_id":"-x"}`, nil, "not a run id"},
		{"agora_orchestrator_watch", `{"run_id":"r","timeout_seconds":300}`, watchArgs{RunID: "r", TimeoutSeconds: ptr[int64](300)}, ""},
	}
	for _, tt := range tests {
		name := tt.tool + " " + tt.raw
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			got, err := findTool(t, tt.tool).decode(json.RawMessage(tt.raw))
			if tt.err != "" {
				var ae *ArgumentError
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want an ArgumentError containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzToolArguments feeds arbitrary bytes to every tool's decode path, the one the server runs.
// It must never panic, refuse with anything but an [ArgumentError], or accept arguments that
// the schema it publishes would reject; what it accepts must survive a round trip.
func FuzzToolArguments(f *testing.F) {
	seeds := []string{
		``, `{}`, `null`, `[]`, `{"subagent":"writer"}`,
		`{"subagent":"writer@sha256:` + strings.Repeat("0", 64) + `","envs":["demo"],"target":"local","input":{"a":[1,2.5,"x",null,true]},"timeout_seconds":60,"wait_seconds":0}`,
		`{"subagent":"w","wait_seconds":-0}`, `{"subagent":"w","envs":["a","a"]}`, `{"subagent":"w","input":{"a":1,"a":2}}`,
		`{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV"}`, `{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","wait_seconds":300}`, `{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","wait_seconds":301}`, `{"plan":{"tasks":[]}}`, `{"run_id":"r-1","timeout_seconds":1}`,
		`{"subagent":"w","Subagent":"x"}`, `{"subagent":"w\u0000"}`, `{"subagent":"w","target":"` + strings.Repeat("a", 65) + `"}`, `{"subagent":"0","target":""}`,
		`{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"x","extra":1}}`, `{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","Answer":"x"}}`,
		`{"resume":{"dispatch":"01ARZ3NDEKTSV4RRFFQ69G5FAV","answer":"x"},"subagent":""}`, // a null subagent beside the resume
	}
	for i, s := range seeds {
		for tl := range len(tools()) {
			f.Add(uint8(tl+i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		tl := tools()[int(which)%len(tools())]
		v, err := tl.decode(data)
		if err != nil {
			var ae *ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("%s refused with %T %v, want an ArgumentError", tl.name, err, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%s: refusal spans lines: %q", tl.name, err)
			}
			return
		}
		raw := bytes.TrimSpace(data)
		if len(raw) == 0 || string(raw) == "null" {
			raw = []byte("{}")
		}
		var inst any
		if err := json.Unmarshal(raw, &inst); err != nil {
			t.Fatalf("%s accepted %q, which is not JSON: %v", tl.name, raw, err)
		}
		if m, ok := inst.(map[string]any); ok && tl.name == "agora_orchestrator_submit" {
			// The plan's content is published for the model to follow, and judged by the
			// service (every problem at once, with its path), not by the argument decoder.
			m["plan"] = map[string]any{"version": 1, "name": "p", "tasks": []any{map[string]any{"id": "a", "subagent": "s"}}}
		}
		if err := tl.resolved.Validate(&inst); err != nil {
			t.Fatalf("%s accepted %q, which its published schema rejects: %v", tl.name, raw, err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tl.decode(again); err != nil {
			t.Fatalf("%s: accepted %q but refused its re-encoding %q: %v", tl.name, raw, again, err)
		}
	})
}

func TestScrub(t *testing.T) {
	token := "tok_" + strings.Repeat("q", 40)
	s, err := New(Config{Catalog: nilCatalog{}, Dispatcher: nilDispatcher{}, Audit: nilAudit})
	if err != nil {
		t.Fatal(err)
	}
	s = s.withTokens([]Client{{Name: "a", Token: token, Ceiling: CeilingRead}})
	tests := []struct{ in, want string }{
		{"plain words", "plain words"},
		{"open /home/alice/.local/share/agora/agora.db: locked", "open <path>: locked"},
		{`repository "/srv/git/app" is not a directory`, `repository "<path>" is not a directory`},
		{"home ~/src/app missing", "home <path> missing"},
		{`command "rm -rf /" matches none of the granted patterns`, `command "rm -rf /" matches none of the granted patterns`},
		{"timeout 30m0s is over target \"local\"'s limit", "timeout 30m0s is over target \"local\"'s limit"},
		{"line one\nline two\tthree", "line one line two three"},
		{"token=" + token, "token=" + redact.Mask},
		{strings.Repeat("é", 300), strings.Repeat("é", 200) + "..."},
	}
	for _, tt := range tests {
		if got := s.scrub(tt.in); got != tt.want {
			t.Errorf("scrub(%.40q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

type nilCatalog struct{ Catalog }

type nilDispatcher struct{ Dispatcher }

func nilAudit(context.Context, AuditEntry) error { return nil }

func TestRedactHandler(t *testing.T) {
	token := strings.Repeat("z", 40)
	var buf bytes.Buffer
	s, _ := New(Config{Catalog: nilCatalog{}, Dispatcher: nilDispatcher{}, Audit: nilAudit,
		Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	s = s.withTokens([]Client{{Name: "a", Token: token, Ceiling: CeilingRead}})
	s.log.With("pre", "x"+token).Info("saw "+token, "err", errors.New("bad "+token), slog.Group("g", "k", token), "c", Client{Name: "a", Token: token})
	if strings.Contains(buf.String(), token) || !strings.Contains(buf.String(), "saw ") {
		t.Errorf("log holds the token: %s", buf.String())
	}
}

func TestArgsHash(t *testing.T) {
	a, fa := argsHash(json.RawMessage(`{"b":[1,2],"a":"x"}`))
	b, fb := argsHash(json.RawMessage(` { "a" : "x", "b" : [1, 2.0] } `))
	if a != b || fa != "jcs" || fb != "jcs" {
		t.Errorf("equal arguments: %s %s / %s %s", a, fa, b, fb)
	}
	c, fc := argsHash(json.RawMessage(`{"a":0.5}`))
	d, fd := argsHash(json.RawMessage(`not json`))
	if fc != "raw" || fd != "raw" || c == d || len(c) != 64 {
		t.Errorf("raw forms: %s %s / %s %s", c, fc, d, fd)
	}
	e, _ := argsHash(nil)
	g, _ := argsHash(json.RawMessage(`{}`))
	if e != g {
		t.Error("no arguments and {} hash differently")
	}
}

func TestCeiling_Allows(t *testing.T) {
	tests := []struct {
		c    Ceiling
		want []bool // read, dispatch, orchestrate
	}{
		{0, []bool{false, false, false}},
		{CeilingRead, []bool{true, false, false}},
		{CeilingDispatch, []bool{true, true, false}},
		{CeilingOrchestrate, []bool{true, true, true}},
		{Ceiling(9), []bool{false, false, false}},
	}
	for _, tt := range tests {
		for i, tier := range Ceilings {
			if got := tt.c.Allows(tier); got != tt.want[i] {
				t.Errorf("%s.Allows(%s) = %v, want %v", tt.c, tier, got, tt.want[i])
			}
		}
		if tt.c.Allows(0) {
			t.Errorf("%s allows a tool with no tier", tt.c)
		}
	}
	for _, c := range Ceilings {
		if got, err := ParseCeiling(c.String()); err != nil || got != c {
			t.Errorf("ParseCeiling(%q) = %v, %v", c, got, err)
		}
	}
	if _, err := ParseCeiling("admin"); err == nil {
		t.Error("ParseCeiling(admin) succeeded")
	}
}

// TestToolTiers pins which tier each tool needs: the ceilings are part of the boundary.
func TestToolTiers(t *testing.T) {
	got := map[string]string{}
	for _, tl := range tools() {
		got[tl.name] = tl.tier.String()
	}
	want := map[string]string{
		"agora_capabilities_list": "read", "agora_subagents_list": "read", "agora_envs_list": "read",
		"agora_dispatch_describe": "read", "agora_orchestrator_status": "read", "agora_orchestrator_watch": "read",
		"agora_dispatch": "dispatch", "agora_dispatch_cancel": "dispatch", "agora_orchestrator_submit": "orchestrate",
		"agora_orchestrator_schedules_list": "read", "agora_orchestrator_schedule_show": "read",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tiers (-want +got):\n%s", diff)
	}
}
