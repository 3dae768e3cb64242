package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/verdict"
)

// What each tool answers, as one Go type per object. The orchestrator's are
// the service's own wire types (internal/orch/api), which `agora orch ... -o json` prints too:
//
//	agora_orchestrator_submit          api.SubmitResponse   = agora orch submit -o json
//	agora_orchestrator_status, _watch  RunAnswer{run}       run = agora orch status -o json,
//	                                                        the answer = orch watch -o json's last line
//	agora_orchestrator_schedules_list  api.Schedules        = agora orch schedule list -o json
//	agora_orchestrator_schedule_show   ScheduleAnswer{schedule} schedule = orch schedule show -o json
//
// Each tool publishes its type's JSON Schema as its outputSchema, and its structured content
// is that type's encoding.

// CapabilitiesAnswer is agora_capabilities_list's answer.
type CapabilitiesAnswer struct {
	Capabilities []catalog.CapabilityEntry `json:"capabilities"`
}

// SubagentsAnswer is agora_subagents_list's answer.
type SubagentsAnswer struct {
	Subagents []catalog.SubagentEntry `json:"subagents"`
}

// EnvsAnswer is agora_envs_list's answer.
type EnvsAnswer struct {
	Envs []catalog.EnvEntry `json:"envs"`
}

// RunAnswer is what agora_orchestrator_status and agora_orchestrator_watch answer: the run as
// `agora orch status -o json` prints it (the options of a task's question filled in).
type RunAnswer struct {
	Run api.Run `json:"run"`
}

// ScheduleAnswer is agora_orchestrator_schedule_show's answer.
type ScheduleAnswer struct {
	Schedule api.Schedule `json:"schedule"`
}

// verifySpec is how a verify gate (verdict.Spec) is encoded: Spec has its own MarshalJSON
// (lowercase keys, the timeout as a duration string), which the schema inferred from its Go
// fields (Command, Timeout as an integer, Protect) does not describe. TestRedTeam29_EveryAnswerFitsItsSchema
// keeps the two the same.
type verifySpec struct {
	Command []string          `json:"command"`
	Timeout string            `json:"timeout,omitempty"`
	Protect []string          `json:"protect,omitempty"`
	Changes []string          `json:"changes,omitempty"`
	Expect  *verifySpecExpect `json:"expect,omitempty"`
}

// verifySpecExpect is a verify gate's expect, as verdict.Spec encodes it.
type verifySpecExpect struct {
	JUnit    string `json:"junit"`
	MinTests int    `json:"min_tests,omitempty"`
}

// outputSchema is the JSON Schema of O, as a tool publishes it: what O encodes to, a type
// with its own MarshalJSON described by what it writes.
func outputSchema[O any]() json.RawMessage {
	spec, err := jsonschema.For[verifySpec](nil)
	if err != nil {
		panic(fmt.Sprintf("output schema of a verify gate: %v", err))
	}
	s, err := jsonschema.For[O](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[verdict.Spec](): spec}})
	if err != nil {
		panic(fmt.Sprintf("output schema of %T: %v", *new(O), err))
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("output schema of %T: %v", *new(O), err))
	}
	return b
}

// returns sets t's output schema to O's.
func returns[O any](t tool) tool {
	t.output = outputSchema[O]()
	return t
}
