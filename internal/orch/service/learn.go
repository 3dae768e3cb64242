package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// learnRefusal refuses a plan with learn tasks from an MCP client (its actor is "mcp:" and
// the client's name, set by the MCP server, never by the client). Learn is a person's
// decision at deploy time (docs/learn.md): `agora orch submit` from a person's shell may ask
// for it, an orchestrator over MCP may not. The MCP server refuses such a plan first and
// audits the refusal; this is the service's own check, and the executor refuses the learn
// dispatch a third time (dispatch.Request.NoLearn).
func learnRefusal(actor string, p *plan.Plan) error {
	if !strings.HasPrefix(actor, api.MCPActorPrefix) {
		return nil
	}
	if ids := p.LearnTasks(); len(ids) > 0 {
		return fmt.Errorf("plan %s: task %s has learn: true, and an MCP client cannot start a learn dispatch: learn is a person's decision (`agora orch submit` from the host); drop learn, or ask a person to submit it", p.Name, strings.Join(ids, ", "))
	}
	return nil
}

// runStatus is the engine's run document with every task whose dispatch was a learn dispatch
// marked learn (docs/learn.md: the mark is everywhere a task is shown), a task on a target in
// mode: learn included: what `agora orch watch`, the MCP run tools and every other client of
// the service read (`agora orch status` marked it from agora.db alone). A run
// whose dispatches cannot be read keeps the plan's marks.
func (s *Server) runStatus(ctx context.Context, ref string) (api.Run, error) {
	run, err := s.Engine.Status(ctx, ref)
	if err != nil || s.LearnInRun == nil || run.ID == "" {
		return run, err
	}
	learn, lerr := s.LearnInRun(ctx, run.ID)
	if lerr != nil || len(learn) == 0 {
		return run, nil
	}
	for i := range run.Tasks {
		if t := &run.Tasks[i]; learn[t.DispatchID] {
			t.Learn = true
		}
	}
	return run, nil
}
