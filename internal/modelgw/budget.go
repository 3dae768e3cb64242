package modelgw

import (
	"net/http"

	"github.com/agora-dev/agora/internal/budget"
)

// budgetCode is the machine-readable code of a refusal for a spent budget.
const budgetCode = "budget_exceeded"

// refuseBudget answers a model call once the dispatch's budget is spent: 400, which neither
// the OpenAI nor the Anthropic clients retry (they retry 408, 409, 429 and 5xx), with an
// error body in the API's own shape, so the agent's CLI shows the reason to the model and
// the person. The refusal has its own audit entry (denied, with the reason) and is never
// counted among the tallied refusals.
func (g *Gateway) refuseBudget(w http.ResponseWriter, ex *exchange, api, spent string) {
	msg := "agora: this dispatch's budget is spent (" + spent + "); no more model calls are allowed"
	ex.decision, ex.reason = decisionDenied, "budget exceeded: "+spent
	writeAPIError(w, api, http.StatusBadRequest, budgetCode, msg)
	if g.onBudget != nil {
		g.onBudget(spent)
	}
}

// writeAPIError answers with an error body in api's own shape, which the agent's CLI shows:
// Anthropic's {"type":"error","error":{...}}, or OpenAI's {"error":{...,"code":code}}.
func writeAPIError(w http.ResponseWriter, api string, status int, code, msg string) {
	var body any
	switch api {
	case APIAnthropic:
		body = map[string]any{"type": "error", "error": map[string]string{"type": "invalid_request_error", "message": msg}}
	default:
		body = map[string]any{"error": map[string]any{"message": msg, "type": code, "param": nil, "code": code}}
	}
	writeJSON(w, status, body)
}

// countUsage adds one model response's usage to the dispatch's meter and to its request's
// audit entry.
// The call is priced as model, the model the gateway forwarded (checked against the pin and
// the prices before it went), never as the name the response carries: an upstream answers
// with dated names no price need list.
func (g *Gateway) countUsage(ex *exchange, count *budget.Response, model string) {
	answered, u, seen := count.Result()
	g.meter.Add(model, u, seen)
	if seen {
		ex.usage = &u
		// The model and the cost go on the request's record, so serve's metrics and traces
		// can count tokens and cost by model from the audit log alone.
		ex.model, ex.costNano, _ = g.meter.Price(model, u)
		if answered != ex.model {
			ex.responseModel = answered
		}
	}
}

// Usage is the model usage counted so far: every model call forwarded, the tokens their
// responses reported, and their cost at the meter's prices.
func (g *Gateway) Usage() budget.Usage { return g.meter.Usage() }
