package modelgw

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
)

// TestGateway_ModelPinned, at the gateway: a model call must name the
// subagent's model, exactly, in every wire shape (chat completions, Responses, Anthropic
// Messages and its token count). Anything else is refused before the upstream sees it, with
// an error in the API's own shape and a denied entry of its own; every trick to make the
// gateway read one model and the upstream another is refused.
func TestGateway_ModelPinned(t *testing.T) {
	json200 := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}
	for _, tc := range []struct {
		api, route, pin string
		extra           string // a field the route's clients send
	}{
		{APIOpenAI, "/model/chat/completions", "gpt-4o-mini", `"messages":[]`},
		{APIOpenAI, "/model/responses", "gpt-4o-mini", `"input":"hi"`},
		{APIAnthropic, "/anthropic/v1/messages", "claude-sonnet-4-5", `"max_tokens":5,"messages":[]`},
		{APIAnthropic, "/anthropic/v1/messages/count_tokens", "claude-sonnet-4-5", `"messages":[]`},
	} {
		t.Run(tc.route, func(t *testing.T) {
			up := newUpstream(t, json200)
			h := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: tc.api, APIKey: []byte(testKey), Model: tc.pin})
			hdr := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
			n := 0
			for _, body := range []string{
				`{"model":"o1-pro-2025-03-19",` + tc.extra + `}`,
				`{"model":"` + tc.pin + `-pro",` + tc.extra + `}`,
				`{"model":"` + strings.ToUpper(tc.pin) + `",` + tc.extra + `}`,
			} {
				resp, b := h.do(t, http.MethodPost, tc.route, hdr, body)
				n++
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(apiError(t, tc.api, b), "is not this subagent's model") {
					t.Fatalf("%s: got %d %s, want 400 in the API's shape", body, resp.StatusCode, b)
				}
				rec := h.audit.lastGateway(t, n)
				r, _ := rec["reason"].(string)
				if rec["decision"] != decisionDenied || !strings.Contains(r, "model not allowed") || !strings.Contains(r, tc.pin) {
					t.Errorf("record %v, want denied naming the pinned model", rec)
				}
			}
			// Two readings of one body: duplicate or case-folded keys, a model that is no
			// string, none at all. Malformed: 400, counted, never forwarded.
			for _, body := range []string{
				`{"model":"` + tc.pin + `","model":"o1-pro",` + tc.extra + `}`,
				`{"model":"` + tc.pin + `","Model":"o1-pro",` + tc.extra + `}`,
				`{"Model":"` + tc.pin + `",` + tc.extra + `}`,
				`{"model":["` + tc.pin + `"],` + tc.extra + `}`,
				`{` + tc.extra + `}`,
				`{"model":"` + tc.pin + `",` + tc.extra + `} {"model":"o1-pro"}`,
				`{"model":"` + tc.pin + `","metadata":{"a":1,"A":2},` + tc.extra + `}`,
			} {
				resp, b := h.do(t, http.MethodPost, tc.route, hdr, body)
				if resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("%s: got %d %s, want 400", body, resp.StatusCode, b)
				}
			}
			if got := up.hits.Load(); got != 0 {
				t.Fatalf("the upstream saw %d refused requests", got)
			}
			// The subagent's model goes through, escaped or not.
			for _, body := range []string{`{"model":"` + tc.pin + `",` + tc.extra + `}`, `{"model":"\u00` + hexByte(tc.pin[0]) + tc.pin[1:] + `",` + tc.extra + `}`} {
				if resp, b := h.do(t, http.MethodPost, tc.route, hdr, body); resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: got %d %s, want it forwarded", body, resp.StatusCode, b)
				}
			}
			if got := up.hits.Load(); got != 2 {
				t.Errorf("the upstream saw %d requests, want the 2 allowed", got)
			}
		})
	}
	// A stored prompt can name a model of its own: refused on the Responses route.
	up := newUpstream(t, json200)
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), Model: "gpt-4o-mini"})
	if resp, b := h.do(t, http.MethodPost, "/model/responses", nil, `{"model":"gpt-4o-mini","prompt":{"id":"pmpt_1"}}`); resp.StatusCode != http.StatusBadRequest || up.hits.Load() != 0 {
		t.Errorf("a stored prompt: %d %s, want 400 and nothing forwarded", resp.StatusCode, b)
	}
}

func hexByte(c byte) string {
	return strings.ToLower(string("0123456789ABCDEF"[c>>4]) + string("0123456789ABCDEF"[c&15]))
}

// apiError returns the message of an error body in the API's shape.
func apiError(t *testing.T, api string, b []byte) string {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message, Code string
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || (api == APIAnthropic && e.Type != "error") {
		t.Fatalf("body %s is no %s error", b, api)
	}
	return e.Error.Message
}

// TestGateway_UnpricedModelRefusedAtRequest: under a usd budget a call naming a model
// agora.yaml does not price (exactly or as a declared alias) is refused before it is sent,
// not after its response spent what nobody could count; a priced one is counted at the price
// of the model the gateway forwarded, whatever dated name the response carries.
func TestGateway_UnpricedModelRefusedAtRequest(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":100}}`))
	})
	prices := budget.Prices{"gpt-4o-mini": {InputPerMTok: 1, OutputPerMTok: 2}, "o1": {InputPerMTok: 15, OutputPerMTok: 60}}
	// No pin (a subagent that names no model): the price check still holds.
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey),
		Meter: budget.NewMeter(budget.Budget{USD: 1}, prices, "gpt-4o-mini")})
	resp, b := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"o1-pro-2025-03-19","messages":[]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(apiError(t, APIOpenAI, b), `cannot count model "o1-pro-2025-03-19"`) {
		t.Fatalf("unpriced model: %d %s, want 400 before forwarding", resp.StatusCode, b)
	}
	if up.hits.Load() != 0 {
		t.Fatal("the unpriced call was forwarded")
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeModelChat, decisionDenied, http.StatusBadRequest, "model not priced")
	if resp, b := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"gpt-4o-mini","messages":[]}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("priced model: %d %s", resp.StatusCode, b)
	}
	rec := h.audit.lastGateway(t, 2)
	// 1000 in at $1/M, 100 out at $2/M: $0.0012, at gpt-4o-mini's price, not unpriced.
	if rec["model"] != "gpt-4o-mini" || rec["response_model"] != "gpt-4o-mini-2024-07-18" || rec["cost_nano_usd"] != int64(1_200_000) {
		t.Errorf("record %v, want the call priced as the model forwarded", rec)
	}
	if s := h.gw.meter.Spent(); s != "" {
		t.Errorf("the budget is spent after a priced call: %s", s)
	}
}
