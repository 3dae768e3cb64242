package mcpserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/strictjson"
)

// DeniedError is a call the server refuses for what its arguments ask, not for how they are
// written: the guard audits it as denied (mcp.tool.denied), never as a call that ran.
type DeniedError struct{ Msg string }

func (e *DeniedError) Error() string { return e.Msg }

// learnInPlan refuses a plan with a task that has a learn key (any value): learn is a person's
// decision (docs/learn.md), the plan schema an MCP client reads does not offer it, and the
// orchestrator service refuses such a plan from an MCP client again. The tasks are read with
// strictjson, keys exact as the plan's own decoder reads them (an escaped "le\u0061rn" is
// learn); a plan that does not read so is refused as invalid, since the service's decoder
// (no two keys alike, every key exact) refuses it too.
func learnInPlan(raw json.RawMessage) error {
	var doc struct {
		Tasks []map[string]json.RawMessage `json:"tasks"`
	}
	if err := strictjson.UnmarshalKnown(raw, &doc); err != nil {
		return argErrorf("argument \"plan\" is not one readable JSON object: %v", err)
	}
	var ids []string
	for i, t := range doc.Tasks {
		if _, ok := t["learn"]; !ok {
			continue
		}
		var id string
		if json.Unmarshal(t["id"], &id) != nil || id == "" || len(id) > 63 {
			id = fmt.Sprintf("tasks[%d]", i)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	return &DeniedError{Msg: fmt.Sprintf("task %s has learn, and an MCP client cannot start a learn dispatch: "+
		"learn is a person's decision (`agora orch submit` on the host); submit the plan without learn", strings.Join(slices.Compact(ids), ", "))}
}
