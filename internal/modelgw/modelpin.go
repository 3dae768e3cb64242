package modelgw

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agora-dev/agora/internal/strictjson"
)

// A sandbox process chooses what it puts in a model request, and the upstream charges by the
// model the request names (a request for o1-pro-2025-03-19 would
// be forwarded, and charged at o1's price). So the gateway reads the model of every model
// request itself, exactly (strictjson: no duplicate or case-folded keys anywhere in the body,
// so the upstream cannot read another model than the gateway did), and forwards it only when
// it is the subagent's model ([Config.Model]) and, under a usd budget, one agora.yaml prices.
// The call is then priced as that model, whatever dated name the response carries.

// maxModelInError bounds the model name a refusal repeats.
const maxModelInError = 64

// modelRequest is what the gateway reads of a model request body: the top-level "model"
// (chat completions, Responses and Anthropic Messages all name it there), on the Responses
// route "prompt", a stored prompt that can carry a model of its own, and the members that ask
// the provider to act or to charge beyond the tokens the meter counts (modelreach.go).
type modelRequest struct {
	Model  *string         `json:"model"`
	Prompt json.RawMessage `json:"prompt"`

	// What the provider runs for the request (refused whatever the budget).
	Tools            []providerTool  `json:"tools"`
	Background       *bool           `json:"background"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
	MCPServers       json.RawMessage `json:"mcp_servers"`
	Container        json.RawMessage `json:"container"`

	// What changes the rate a call is charged at (refused under a usd budget).
	ServiceTier  *string         `json:"service_tier"`
	Speed        *string         `json:"speed"`
	InferenceGeo *string         `json:"inference_geo"`
	Modalities   []string        `json:"modalities"`
	Audio        json.RawMessage `json:"audio"`
}

// providerTool is what the gateway reads of one entry of a request's "tools": its type.
type providerTool struct {
	Type *string `json:"type"`
}

// decodeModelRequest reads body. The body must be one JSON object with no two keys equal
// under case folding at any level, a string "model" spelt exactly so, and "tools" a list of
// objects; responses refuses a stored prompt too. Errors never repeat the body.
func decodeModelRequest(body []byte, responses bool) (*modelRequest, error) {
	var mr modelRequest
	if err := strictjson.UnmarshalKnown(body, &mr); err != nil {
		return nil, errors.New("the body is not one JSON object with one reading (keys are case-sensitive, each at most once, at every level; \"model\" a string, \"tools\" a list of objects)")
	}
	switch {
	case mr.Model == nil:
		return nil, errors.New(`the body names no "model"`)
	case responses && len(mr.Prompt) > 0 && string(mr.Prompt) != "null":
		return nil, errors.New(`a stored prompt ("prompt") is refused: it can name a model of its own`)
	}
	return &mr, nil
}

// checkModel refuses a model call that names another model than the subagent's, or one the
// usd budget could not count, with an error in the API's own shape and a denied entry of its
// own; it reports whether the call may go on.
func (g *Gateway) checkModel(w http.ResponseWriter, ex *exchange, api string, model string, call bool) bool {
	name := quoted(model, maxModelInError)
	if g.pin != "" && model != g.pin && !weakenPin {
		g.refuseModel(w, ex, api, "model_not_allowed",
			"agora: model "+name+" is not this subagent's model; its model requests must name "+quoted(g.pin, maxModelInError),
			"model not allowed: "+name+" is not the subagent's model "+quoted(g.pin, maxModelInError))
		return false
	}
	if call {
		if why := g.meter.Unpriced(model); why != "" {
			g.refuseModel(w, ex, api, "model_not_priced", "agora: "+why+"; the call is refused before it is sent",
				"model not priced: "+why)
			return false
		}
	}
	return true
}

// refuseModel answers 400 (no client retries it) with msg in the API's error shape and
// records the refusal as denied with reason, in an entry of its own: it is a policy decision,
// not a malformed request.
func (g *Gateway) refuseModel(w http.ResponseWriter, ex *exchange, api, code, msg, reason string) {
	ex.decision, ex.reason = decisionDenied, g.red.String(reason)
	writeAPIError(w, api, http.StatusBadRequest, code, g.red.String(msg))
}
