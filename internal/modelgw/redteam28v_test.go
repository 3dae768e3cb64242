package modelgw

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/jcs"
)

// A model call's tool.gateway entry carries the usage and cost upstream
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

// The sandbox names a fetch's URL; a host percent-encoding a byte that
// is not UTF-8 ("%ff.example") decodes to invalid UTF-8. Its refusal must still be an entry
// the audit can write: a tool.gateway record whose details have no canonical form is dropped.
func TestRedTeam28V_FetchHostNotUTF8KeepsTheEntryEncodable(t *testing.T) {
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test"), APIKey: []byte(testKey)})
	for i, u := range []string{"http://%ff.granted.test/", "http://%e2%82.granted.test/%ff"} {
		resp, b := h.do(t, http.MethodPost, "/fetch", nil, fmt.Sprintf(`{"url":%q,"method":"GET"}`, u))
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: fetched: %s", u, b)
		}
		if testing.Verbose() {
			t.Logf("%s: %d %s", u, resp.StatusCode, b)
		}
		recs := h.audit.waitGateway(t, i+1)
		if _, err := jcs.Marshal(recs[i]); err != nil {
			t.Errorf("%s: the refusal's tool.gateway details %q have no canonical form, so the audit drops the entry: %v", u, recs[i], err)
		}
	}
}
