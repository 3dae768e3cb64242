package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// schemaChecker validates tool answers against the output schemas a session listed.
type schemaChecker struct {
	t       *testing.T
	cs      *mcp.ClientSession
	schemas map[string]*jsonschema.Resolved
	ok      map[string]int // successful, validated answers per tool
	errs    map[string]int // tool errors per tool
}

func newSchemaChecker(t *testing.T, cs *mcp.ClientSession) *schemaChecker {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	c := &schemaChecker{t: t, cs: cs, schemas: map[string]*jsonschema.Resolved{}, ok: map[string]int{}, errs: map[string]int{}}
	for _, tl := range res.Tools {
		if tl.OutputSchema == nil {
			t.Errorf("tool %s declares no outputSchema", tl.Name)
			continue
		}
		b, err := json.Marshal(tl.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: outputSchema is not a JSON Schema: %v", tl.Name, err)
		}
		if s.Type != "object" {
			t.Errorf("%s: outputSchema has type %q; structured content is an object", tl.Name, s.Type)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: outputSchema does not resolve: %v", tl.Name, err)
		}
		c.schemas[tl.Name] = r
	}
	return c
}

// call calls a tool and checks the answer: a success carries structured content valid against
// the tool's schema; an error carries text and no structured content.
func (c *schemaChecker) call(name string, args any) *mcp.CallToolResult {
	c.t.Helper()
	res := call(c.t, c.cs, name, args)
	if res.IsError {
		c.errs[name]++
		if text(res) == "" || res.StructuredContent != nil {
			c.t.Errorf("%s error: text %q, structured %v", name, text(res), res.StructuredContent)
		}
		return res
	}
	r, ok := c.schemas[name]
	if !ok {
		c.t.Fatalf("%s answered but has no outputSchema", name)
	}
	if res.StructuredContent == nil {
		c.t.Errorf("%s: a success without structured content", name)
		return res
	}
	// The instance as a client decodes it: plain JSON values.
	b, _ := json.Marshal(res.StructuredContent)
	var inst any
	if err := json.Unmarshal(b, &inst); err != nil {
		c.t.Fatal(err)
	}
	if err := r.Validate(inst); err != nil {
		c.t.Errorf("%s: structured content does not validate against its outputSchema: %v\n%s", name, err, b)
	}
	c.ok[name]++
	return res
}

// mustReject checks that the schema of tool is strict: res's answer with a field added, and
// with its run's state removed, does not validate (a schema that takes anything would pass
// every answer above).
func (c *schemaChecker) mustReject(name string, res *mcp.CallToolResult) {
	c.t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	for _, doctor := range []func(m map[string]any){
		func(m map[string]any) { m["undeclared"] = 1 },
		func(m map[string]any) { delete(m["run"].(map[string]any), "state") },
		func(m map[string]any) { m["run"].(map[string]any)["total"] = "two" },
	} {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatal(err)
		}
		doctor(m)
		if err := c.schemas[name].Validate(m); err == nil {
			c.t.Errorf("%s: a doctored answer validates against its outputSchema", name)
		}
	}
}

// TestOutputSchema_EveryToolOverStdioAndHTTP calls every tool of the real binary, over stdio and
// over HTTP, on success and error paths, and validates each structured answer against the
// outputSchema the tool declares (failed before: no tool declared one).
func TestOutputSchema_EveryToolOverStdioAndHTTP(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	serveOrch(t, home)
	planFile := filepath.Join(t.TempDir(), "nightly.yaml")
	if err := os.WriteFile(planFile, []byte("version: 1\nname: nightly-plan\ntasks: [{id: a, subagent: writer, env: [demo]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agora(t, home, nil, "orch", "schedule", "add", "nightly", "--cron", "0 2 * * *", planFile)
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKEN=" + token})
	sessions := map[string]*mcp.ClientSession{"stdio": stdioSession(t, home), "http": httpSession(t, srv.url, token)}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			c := newSchemaChecker(t, sessions[transport])
			c.call("agora_capabilities_list", nil)
			c.call("agora_subagents_list", nil)
			c.call("agora_envs_list", nil)

			var fin dispatchOut
			decode(t, c.call("agora_dispatch", map[string]any{"subagent": "writer", "envs": []string{"demo"}, "wait_seconds": 120}), &fin)
			c.call("agora_dispatch", map[string]any{"subagent": "asker", "wait_seconds": 120})
			c.call("agora_dispatch", map[string]any{"subagent": "rogue"})
			c.call("agora_dispatch", map[string]any{"subagent": "nobody"})
			c.call("agora_dispatch_describe", map[string]any{"id": fin.Dispatch.ID})
			c.call("agora_dispatch_describe", map[string]any{"id": "nope"})
			c.call("agora_dispatch_cancel", map[string]any{"id": fin.Dispatch.ID})
			c.call("agora_dispatch_cancel", map[string]any{"id": "nope"})

			plan := map[string]any{"version": 1, "name": "schema-" + transport, "tasks": []any{
				map[string]any{"id": "ask", "subagent": "asker"},
			}}
			var sub api.SubmitResponse
			decode(t, c.call("agora_orchestrator_submit", map[string]any{"plan": plan}), &sub)
			c.call("agora_orchestrator_submit", map[string]any{"plan": plan}) // the same run again
			c.call("agora_orchestrator_submit", map[string]any{"plan": map[string]any{"version": 1, "name": "bad", "tasks": []any{map[string]any{"id": "a", "subagent": "nobody"}}}})
			for range 30 {
				var st RunAnswerOut
				decode(t, c.call("agora_orchestrator_watch", map[string]any{"run_id": sub.Run.ID, "timeout_seconds": 2}), &st)
				if st.Run.State == lifecycle.RunNeedsInput {
					break
				}
			}
			var st RunAnswerOut
			stRes := c.call("agora_orchestrator_status", map[string]any{"run_id": sub.Run.ID})
			decode(t, stRes, &st)
			c.mustReject("agora_orchestrator_status", stRes)
			if len(st.Run.Tasks) != 1 || !slices.Equal(st.Run.Tasks[0].Options, []string{"red", "blue"}) {
				t.Errorf("status of a run waiting on a question: %+v", st.Run.Tasks)
			}
			c.call("agora_orchestrator_status", map[string]any{"run_id": "nope"})
			c.call("agora_orchestrator_watch", map[string]any{"run_id": "nope", "timeout_seconds": 1})
			c.call("agora_orchestrator_schedules_list", nil)
			c.call("agora_orchestrator_schedule_show", map[string]any{"name": "nightly"})
			c.call("agora_orchestrator_schedule_show", map[string]any{"name": "nope"})

			for _, name := range theEleven {
				if c.ok[name] == 0 {
					t.Errorf("%s: no successful answer was validated", name)
				}
			}
			for _, name := range []string{"agora_dispatch", "agora_dispatch_describe", "agora_dispatch_cancel", "agora_orchestrator_submit",
				"agora_orchestrator_status", "agora_orchestrator_watch", "agora_orchestrator_schedule_show"} {
				if c.errs[name] == 0 {
					t.Errorf("%s: its error path was not reached", name)
				}
			}
		})
	}
}

// RunAnswerOut is the status and watch answer as a client reads it.
type RunAnswerOut struct {
	Run api.Run `json:"run"`
}
