package dispatch

import (
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/config"
)

// budgetGrace is how long the sandbox may run on after the gateway refused a model call for
// a spent budget: the agent's CLI reads the refusal and exits on its own; after it the
// sandbox is stopped.
const budgetGrace = 5 * time.Second

// effectiveBudget is the tightest of the subagent's, the target's, the caller's ceilings and
// the request's budget, which may narrow them and never raise the first two. A usd budget
// needs a price for the subagent's model: without one it could not be counted, and the
// dispatch is refused (fail closed). nil: no budget.
func (d *Dispatcher) effectiveBudget(req Request, subagent string, doc catalog.SubagentDoc, target config.Target) (*budget.Budget, error) {
	ceilings := []budget.Ceiling{
		{Source: fmt.Sprintf("subagent %q", subagent), Budget: doc.Budget},
		{Source: fmt.Sprintf("target %q", req.Target), Budget: target.Budget},
	}
	eff, err := budget.Narrow(req.Budget, ceilings...)
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	for _, c := range req.Ceilings {
		if err := c.Budget.Validate(); err != nil {
			return nil, &RequestError{Err: fmt.Errorf("%s: %w", c.Source, err)}
		}
		eff = budget.Min(eff, c.Budget)
	}
	if _, ok := modelRoute(doc.Runtime); !ok {
		// The target's or a plan's budget does not concern a runtime without model calls;
		// one the caller asks for is a mistake worth saying.
		if !req.Budget.IsZero() {
			return nil, reqErr("a budget counts model calls, and the %s runtime makes none through agora's gateway", doc.Runtime)
		}
		return nil, nil
	}
	if eff.IsZero() {
		return nil, nil
	}
	if err := d.Config.Models.Require(eff, doc.Model); err != nil {
		return nil, &RequestError{Err: err}
	}
	return &eff, nil
}

// meterFor is the meter a dispatch's gateway counts against: its budget, the prices of
// agora.yaml, and the subagent's model for responses that name none.
func (d *Dispatcher) meterFor(r *Record, model string) *budget.Meter {
	var b budget.Budget
	if r.Budget != nil {
		b = *r.Budget
	}
	return budget.NewMeter(b, d.Config.Models, model)
}
