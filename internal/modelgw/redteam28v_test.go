package modelgw

import (
	"net/http"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/jcs"
)

// Red team #28 (vocab): a model call's tool.gateway entry carries the usage and cost upstream
// reported; an entry is written only when its details have an RFC 8785 form (numbers within
// ±2^53). An upstream reporting absurd usage (the tokens are clamped to 2^50) must not price
// the call past that range: the entry would be refused by the audit and the call that ran
// left unrecorded (serve drops a record it cannot keep).
func TestRedTeam28V_AbsurdUsageKeepsTheEntryEncodable(t *testing.T) {
	up := newUpstream(t, chatReply(1<<62))
	prices := budget.Prices{"gpt-4o-mini": {InputPerMTok: 3, OutputPerMTok: 15}}
	m := budget.NewMeter(budget.Budget{}, prices, "gpt-4o-mini")
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), Meter: m})
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions", http.Header{"Content-Type": {"application/json"}}, `{"model":"gpt-4o-mini"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	recs := h.audit.waitGateway(t, 1)
	if _, ok := recs[0]["cost_nano_usd"]; !ok {
		t.Fatalf("record %v holds no cost", recs[0])
	}
	if _, err := jcs.Marshal(recs[0]); err != nil {
		t.Errorf("the call's tool.gateway details %v have no canonical form, so the audit refuses the entry: %v", recs[0], err)
	}
}
