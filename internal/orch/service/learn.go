package service

import (
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
