package mcpserver

import (
	"context"
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

// LearnGate is what a [Dispatcher] may also do: tell, before the call is admitted, that
// agora_dispatch would start a learn dispatch, which an MCP client may not (docs/learn.md).
// The guard then audits the call as denied (mcp.tool.denied) before anything happens;
// without it the dispatcher's own refusal followed an entry saying the call was allowed.
// Errors are the refusal's text.
type LearnGate interface {
	// LearnTarget refuses a dispatch to target ("" is the default) in mode: learn.
	LearnTarget(target string) error
	// LearnParent refuses an answer to dispatch id when that is a learn dispatch (its answer
	// would be one too); nil for an id it does not know (the call says so itself).
	LearnParent(ctx context.Context, id string) error
}

// learnDenied is the [DeniedError] of agora_dispatch arguments that would start a learn
// dispatch, or nil.
func (s *Server) learnDenied(ctx context.Context, args any) error {
	a, ok := args.(dispatchArgs)
	g, gate := s.cfg.Dispatcher.(LearnGate)
	if !ok || !gate {
		return nil
	}
	var err error
	if a.Resume != nil {
		err = g.LearnParent(ctx, a.Resume.Dispatch)
	} else {
		target := ""
		if a.Target != nil {
			target = *a.Target
		}
		err = g.LearnTarget(target)
	}
	if err != nil {
		return &DeniedError{Msg: err.Error()}
	}
	return nil
}
