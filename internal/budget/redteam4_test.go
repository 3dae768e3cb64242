package budget

import "testing"

// TestRedTeam4_AnthropicCacheWritesPriced: Anthropic charges a
// prompt-cache write 1.25 times the input price for the 5-minute cache and twice it for the
// 1-hour one, and the request chooses which (cache_control ttl). The meter charged every
// write at the input price, so a request marking its whole prompt "ttl": "1h" spent up to
// twice what a usd budget counted. Writes are priced by the usage's breakdown; writes it does
// not place are priced as 1-hour ones. failed before: each cost was the input price's.
func TestRedTeam4_AnthropicCacheWritesPriced(t *testing.T) {
	p := Price{InputPerMTok: 3, OutputPerMTok: 15}
	for _, tc := range []struct {
		name, usage string
		want        int64 // nano-dollars
	}{
		{"1h writes", `{"input_tokens":0,"cache_creation_input_tokens":1000000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":1000000},"output_tokens":0}`, 6_000_000_000},
		{"5m writes", `{"input_tokens":0,"cache_creation_input_tokens":1000000,"cache_creation":{"ephemeral_5m_input_tokens":1000000,"ephemeral_1h_input_tokens":0},"output_tokens":0}`, 3_750_000_000},
		{"no breakdown", `{"input_tokens":0,"cache_creation_input_tokens":1000000,"output_tokens":0}`, 6_000_000_000},
		{"mixed with reads and fresh", `{"input_tokens":1000000,"cache_read_input_tokens":1000000,"cache_creation_input_tokens":2000000,"cache_creation":{"ephemeral_5m_input_tokens":1000000,"ephemeral_1h_input_tokens":1000000},"output_tokens":1000000}`,
			// fresh 1M at 3, read 1M at 3 (no cached price), writes 1M at 3.75 and 1M at 6, output 1M at 15
			3_000_000_000 + 3_000_000_000 + 3_750_000_000 + 6_000_000_000 + 15_000_000_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewResponse(ShapeAnthropic, false)
			r.Write([]byte(`{"model":"claude-sonnet-4-5","usage":` + tc.usage + `}`))
			_, u, seen := r.Result()
			if !seen {
				t.Fatal("no usage read")
			}
			if got := p.CostNano(u); got != tc.want {
				t.Errorf("cost %d nano-dollars, want %d (usage %+v)", got, tc.want, u)
			}
		})
	}
}

// TestRedTeam4_UnpinnedSubagentUnderUSDBudget: a claude-code
// subagent that names no model is not pinned, so a usd budget for it could only be counted
// if every model the sandbox asks for were priced. It is refused at dispatch start: no price
// holds for the empty name, and none can be declared for it. Held.
func TestRedTeam4_UnpinnedSubagentUnderUSDBudget(t *testing.T) {
	ps := Prices{"claude-opus-4-1": {InputPerMTok: 15, OutputPerMTok: 75}}
	if err := ps.Require(Budget{USD: 1}, ""); err == nil {
		t.Error("a usd budget for a subagent with no model was accepted")
	}
	for _, bad := range []Prices{{"": {InputPerMTok: 1}}, {"m": {Aliases: []string{""}}}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("prices %+v validated: the empty name would be priced", bad)
		}
	}
}
