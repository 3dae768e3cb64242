package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/orch/api"
)

// This file is the privilege boundary (ADR-0005): the ONLY place a tool is defined. Every tool
// here composes the catalog at run time; nothing registers, assigns, applies, retires, reads
// secrets, audits, serves, or cancels an orchestrator run. TestPrivilegeBoundary lists the tools
// through real clients and fails on any change to this set; adding a tool is a design decision
// that goes through review of ADR-0005 first.

// tool is one MCP tool: its name, the ceiling tier it needs, what a client is told about it,
// its input schema, and the decode and run steps [Server.guard] wraps.
type tool struct {
	name     string
	tier     Ceiling
	title    string
	desc     string
	readOnly bool
	destruct bool
	idem     bool
	open     bool
	schema   json.RawMessage // the published input schema, marshalled once
	output   json.RawMessage // the published output schema: its answer's type's (outputs.go)
	resolved *jsonschema.Resolved
	decode   func(json.RawMessage) (any, error)
	run      func(ctx context.Context, s *Server, p Principal, args any) (any, error)
}

// define binds a tool to its argument type, so decode and run cannot disagree about it.
func define[T any, P interface {
	*T
	checker
}](t tool, props map[string]*jsonschema.Schema, run func(*Server, context.Context, Principal, T) (any, error)) tool {
	schema, resolved := schemaFor[T](props)
	b, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("input schema of %s: %v", t.name, err))
	}
	t.schema, t.resolved = b, resolved
	fields := jsonFields(reflect.TypeFor[T]())
	t.decode = func(raw json.RawMessage) (any, error) { return decodeArgs[T, P](raw, fields) }
	t.run = func(ctx context.Context, s *Server, p Principal, args any) (any, error) {
		return run(s, ctx, p, args.(T))
	}
	return t
}

// mcpTool is the tool as tools/list publishes it.
func (t tool) mcpTool() *mcp.Tool {
	destruct, open := t.destruct, t.open
	return &mcp.Tool{
		Name:         t.name,
		Title:        t.title,
		Description:  t.desc,
		InputSchema:  t.schema,
		OutputSchema: t.output,
		Annotations: &mcp.ToolAnnotations{
			Title:           t.title,
			ReadOnlyHint:    t.readOnly,
			DestructiveHint: &destruct, // the spec's default is true: always say
			IdempotentHint:  t.idem,
			OpenWorldHint:   &open, // the spec's default is true: always say
		},
	}
}

// bareObject is the input schema a served tool is registered with in place of its published one
// (see [tool.served]).
var bareObject = json.RawMessage(`{"type":"object"}`)

// served is the tool as the SDK server keeps it to call it: the published tool, except that its
// input schema is [bareObject] when the published one carries no x-mcp-header annotation. Over
// HTTP with protocol 2026-07-28 the SDK marshals and decodes the called tool's whole input
// schema on every call, only to look for those annotations (validateParamHeaders); agora's
// schemas have none, and agora never lets the SDK check arguments against a schema (the guard
// decodes and checks them itself, decodeArgs), so the bare schema changes no answer. A schema
// that mentions x-mcp-header anywhere keeps it, and the SDK checks the headers as before.
// tools/list still publishes [tool.mcpTool]'s schema ([Server.toolMiddleware] swaps it in).
func (t tool) served() *mcp.Tool {
	mt := t.mcpTool()
	if !bytes.Contains(t.schema, []byte("x-mcp-header")) {
		mt.InputSchema = bareObject
	}
	return mt
}

// toolTable is built on first use, not at init: deriving the eleven input schemas costs
// milliseconds that every agora process (each CLI command, each sandbox's worker) would
// otherwise pay whether or not it serves MCP.
var toolTable = sync.OnceValue(func() []tool {
	return []tool{
		returns[CapabilitiesAnswer](define(tool{
			name: "agora_capabilities_list", tier: CeilingRead, title: "List capabilities",
			desc:     "List the registered capabilities: name, version digest, registered time and description. Metadata only.",
			readOnly: true, idem: true,
		}, noProps(), (*Server).capabilitiesList)),
		returns[SubagentsAnswer](define(tool{
			name: "agora_subagents_list", tier: CeilingRead, title: "List subagents",
			desc:     "List the registered subagents: name, version digest, registered time, description, runtime and the capabilities it was registered with ({name, digest} each). Metadata only: no prompts.",
			readOnly: true, idem: true,
		}, noProps(), (*Server).subagentsList)),
		returns[EnvsAnswer](define(tool{
			name: "agora_envs_list", tier: CeilingRead, title: "List env bundles",
			desc:     "List the registered env bundles: name, version digest, registered time, description, and the KEYS of their values and secrets. Never values.",
			readOnly: true, idem: true,
		}, noProps(), (*Server).envsList)),
		returns[DispatchAnswer](define(tool{
			name: "agora_dispatch", tier: CeilingDispatch, title: "Dispatch a subagent",
			desc: "Run a registered subagent in a sandbox with env bundles, on a target, with a JSON input and a timeout. " +
				"Waits up to wait_seconds (default 30, at most 300) and returns the dispatch record, finished or not; " +
				"a running dispatch keeps running after this call returns (follow it with agora_dispatch_describe). " +
				"The worker starts in a checkout of the named workspace at the revision (the workspaces people registered are " +
				"listed in the workspace argument's description), or in an empty directory; its changes come back as a patch ref.",
			open: true,
		}, dispatchProps(), (*Server).dispatch)),
		returns[DispatchAnswer](define(tool{
			name: "agora_dispatch_describe", tier: CeilingRead, title: "Describe a dispatch",
			desc: "Return a dispatch's record: state, reason, exit code, refs (digests) to its patch and outputs, and the question when it needs input. " +
				"With wait_seconds (at most 300) it first waits for the dispatch to change state or end, sending progress notifications; " +
				"call it again to wait longer than one call.",
			readOnly: true, idem: true,
		}, describeProps(), (*Server).dispatchDescribe)),
		returns[DispatchAnswer](define(tool{
			name: "agora_dispatch_cancel", tier: CeilingDispatch, title: "Cancel a dispatch",
			desc:     "Cancel a running dispatch and everything it started; returns the final record. Cancelling a dispatch that already ended changes nothing.",
			destruct: true, idem: true,
		}, idProps(), (*Server).dispatchCancel)),
		returns[api.SubmitResponse](define(tool{
			name: "agora_orchestrator_submit", tier: CeilingOrchestrate, title: "Submit an orchestrator plan",
			desc: "Submit a plan (an object of tasks over registered subagents, envs and targets) to the orchestrator; returns the run.",
			open: true,
		}, submitProps(), (*Server).orchestratorSubmit)),
		returns[RunAnswer](define(tool{
			name: "agora_orchestrator_status", tier: CeilingRead, title: "Orchestrator run status",
			desc: "Return the status of an orchestrator run and its tasks. When a task waits for a person's answer, next says " +
				"the exact `agora orch answer RUN TASK --answer TEXT` a person must run on the host (no MCP tool answers a run's question).",
			readOnly: true, idem: true,
		}, runProps(), (*Server).orchestratorStatus)),
		returns[RunAnswer](define(tool{
			name: "agora_orchestrator_watch", tier: CeilingRead, title: "Watch an orchestrator run",
			desc: "Wait up to timeout_seconds (default 30, at most 300) for an orchestrator run to change or end, then return its status. " +
				"A run in needs_input is returned at once: only a person on the host can move it, and its next says the exact command.",
			readOnly: true, idem: true,
		}, watchProps(), (*Server).orchestratorWatch)),
		returns[api.Schedules](define(tool{
			name: "agora_orchestrator_schedules_list", tier: CeilingRead, title: "List orchestrator schedules",
			desc: "List the schedules people added on the host: each runs a plan at the slots of a cron spec in a time zone " +
				"(run ids NAME@SLOT). Name, spec, zone, plan name and digest, queue, last and next slot. Schedules are added and removed on the host only.",
			readOnly: true, idem: true,
		}, noProps(), (*Server).orchestratorSchedules)),
		returns[ScheduleAnswer](define(tool{
			name: "agora_orchestrator_schedule_show", tier: CeilingRead, title: "Show an orchestrator schedule",
			desc:     "Return one schedule with its recent runs (id, state, slot, and how many missed slots each coalesced); follow a run with agora_orchestrator_status.",
			readOnly: true, idem: true,
		}, scheduleProps(), (*Server).orchestratorSchedule)),
	}
})

// tools returns the eleven tools.
func tools() []tool { return toolTable() }

// tierOf returns the ceiling tier tool name needs.
func tierOf(name string) (Ceiling, bool) {
	for _, t := range toolTable() {
		if t.name == name {
			return t.tier, true
		}
	}
	return 0, false
}
