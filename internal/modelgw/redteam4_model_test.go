package modelgw

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
)

// TestRedTeam4_ModelRequestsTheProviderActsOn: a model request
// is forwarded with the gateway's key, so what it asks the provider to do is done on the
// dispatch's account and out of the grant's reach. A sandbox process (a granted curl, a
// script in the repository) could ask for provider-run tools that fetch any URL or call any
// MCP server (an egress the grant never allowed: docs/runtimes.md turns web search off in
// both CLIs because it is "never host-restricted") and that cost per call outside the tokens
// the meter counts, or a background response whose usage the gateway never sees. These are
// refused whatever the budget, before the upstream sees them. failed before: every one was
// forwarded.
func TestRedTeam4_ModelRequestsTheProviderActsOn(t *testing.T) {
	json200 := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}
	for _, tc := range []struct {
		api, route, pin, extra string
		refused, allowed       []string // extra members of the body
	}{
		{api: APIOpenAI, route: "/model/responses", pin: "gpt-5.5", extra: `"input":"hi"`,
			refused: []string{
				`"tools":[{"type":"web_search"}]`,
				`"tools":[{"type":"web_search_preview"}]`,
				`"tools":[{"type":"mcp","server_label":"x","server_url":"https://evil.example/mcp","require_approval":"never"}]`,
				`"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]`,
				`"tools":[{"type":"image_generation"}]`,
				`"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]`,
				`"tools":[{"type":"computer_use_preview","display_width":1,"display_height":1,"environment":"linux"}]`,
				`"tools":[{"type":"function","name":"f","parameters":{}},{"type":"web_search"}]`,
				`"tools":[{"name":"f"}]`,
				`"background":true`,
			},
			// What the real Codex CLI 0.169.0 sends (function, custom, tool_search).
			allowed: []string{`"tools":[{"type":"function","name":"exec_command","parameters":{}},{"type":"custom","name":"apply_patch"},{"type":"tool_search"}]`, `"background":false`}},
		{api: APIOpenAI, route: "/model/chat/completions", pin: "gpt-4o-mini", extra: `"messages":[]`,
			refused: []string{`"web_search_options":{}`, `"tools":[{"type":"web_search"}]`},
			allowed: []string{`"tools":[{"type":"function","function":{"name":"read_file","parameters":{}}}]`}},
		{api: APIAnthropic, route: "/anthropic/v1/messages", pin: "claude-sonnet-4-5", extra: `"max_tokens":5,"messages":[]`,
			refused: []string{
				`"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]`,
				`"tools":[{"type":"web_search_20250305","name":"web_search"}]`,
				`"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`,
				`"mcp_servers":[{"type":"url","url":"https://evil.example/mcp","name":"x"}]`,
				`"container":"container_1"`,
			},
			// What the real Claude Code CLI sends: tools with no type.
			allowed: []string{`"tools":[{"name":"Bash","input_schema":{}},{"type":"custom","name":"x","input_schema":{}},{"type":"bash_20250124","name":"bash"}]`}},
	} {
		t.Run(tc.route, func(t *testing.T) {
			up := newUpstream(t, json200)
			h := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: tc.api, APIKey: []byte(testKey), Model: tc.pin})
			hdr := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
			for i, m := range tc.refused {
				body := `{"model":"` + tc.pin + `",` + tc.extra + `,` + m + `}`
				resp, b := h.do(t, http.MethodPost, tc.route, hdr, body)
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(apiError(t, tc.api, b), "agora:") {
					t.Errorf("%s: got %d %s, want 400 in the API's shape", m, resp.StatusCode, b)
					continue
				}
				if rec := h.audit.lastGateway(t, i+1); rec["decision"] != decisionDenied {
					t.Errorf("%s: record %v, want denied", m, rec)
				}
			}
			if got := up.hits.Load(); got != 0 {
				t.Fatalf("the upstream saw %d refused requests", got)
			}
			for _, m := range tc.allowed {
				body := `{"model":"` + tc.pin + `",` + tc.extra + `,` + m + `}`
				if resp, b := h.do(t, http.MethodPost, tc.route, hdr, body); resp.StatusCode != http.StatusOK {
					t.Errorf("%s: got %d %s, want it forwarded", m, resp.StatusCode, b)
				}
			}
		})
	}
}

// TestRedTeam4_PriceChangingRequestsUnderUSDBudget: under a usd
// budget the meter prices a call at the model's standard rate, so a request that asks the
// provider for a dearer rate (OpenAI's service_tier priority or scale, Anthropic's fast mode,
// US-only inference, the 1M-context beta, audio output) would be undercounted: a budget
// dodged. Refused at the request under a usd budget; forwarded without one (nothing in
// dollars to dodge) and with the standard or cheaper tiers. failed before: all forwarded.
func TestRedTeam4_PriceChangingRequestsUnderUSDBudget(t *testing.T) {
	json200 := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"usage":{"input_tokens":1,"output_tokens":1,"prompt_tokens":1,"completion_tokens":1}}`))
	}
	prices := budget.Prices{"gpt-5.5": {InputPerMTok: 1, OutputPerMTok: 2}, "claude-opus-5": {InputPerMTok: 5, OutputPerMTok: 25}}
	type req struct {
		body string
		hdr  http.Header
	}
	for _, tc := range []struct {
		api, route, pin, extra string
		refused, allowed       []req
	}{
		{api: APIOpenAI, route: "/model/responses", pin: "gpt-5.5", extra: `"input":"hi"`,
			refused: []req{{body: `"service_tier":"priority"`}, {body: `"service_tier":"scale"`}},
			allowed: []req{{body: `"service_tier":"default"`}, {body: `"service_tier":"flex"`}, {body: `"service_tier":"auto"`}, {body: `"service_tier":null`}}},
		{api: APIOpenAI, route: "/model/chat/completions", pin: "gpt-5.5", extra: `"messages":[]`,
			refused: []req{{body: `"service_tier":"priority"`}, {body: `"modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"}`}},
			allowed: []req{{body: `"modalities":["text"]`}, {body: `"n":3`}}},
		{api: APIAnthropic, route: "/anthropic/v1/messages", pin: "claude-opus-5", extra: `"max_tokens":5,"messages":[]`,
			refused: []req{
				{body: `"speed":"fast"`, hdr: http.Header{"Anthropic-Beta": {"fast-mode-2026-02-01"}}},
				{body: `"inference_geo":"us"`},
				{body: `"stream":false`, hdr: http.Header{"Anthropic-Beta": {"claude-code-20250219,context-1m-2025-08-07"}}},
				{body: `"stream":false`, hdr: http.Header{"Anthropic-Beta": {"fast-mode-2026-02-01"}}},
			},
			allowed: []req{
				{body: `"speed":"standard"`},
				{body: `"service_tier":"standard_only"`},
				{body: `"stream":false`, hdr: http.Header{"Anthropic-Beta": {"claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"}}},
			}},
	} {
		t.Run(tc.route, func(t *testing.T) {
			up := newUpstream(t, json200)
			send := func(h *harness, r req) (*http.Response, []byte) {
				hdr := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
				for k, v := range r.hdr {
					hdr[k] = v
				}
				return h.do(t, http.MethodPost, tc.route, hdr, `{"model":"`+tc.pin+`",`+tc.extra+`,`+r.body+`}`)
			}
			h := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: tc.api, APIKey: []byte(testKey), Model: tc.pin,
				Meter: budget.NewMeter(budget.Budget{USD: 1}, prices, tc.pin)})
			for _, r := range tc.refused {
				resp, b := send(h, r)
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(apiError(t, tc.api, b), "usd budget") {
					t.Errorf("%s %v: got %d %s, want 400 naming the usd budget", r.body, r.hdr, resp.StatusCode, b)
				}
			}
			if got := up.hits.Load(); got != 0 {
				t.Fatalf("the upstream saw %d refused requests", got)
			}
			for _, r := range tc.allowed {
				if resp, b := send(h, r); resp.StatusCode != http.StatusOK {
					t.Errorf("%s %v: got %d %s, want it forwarded", r.body, r.hdr, resp.StatusCode, b)
				}
			}
			// Without a usd budget there are no dollars to dodge: forwarded.
			free := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: tc.api, APIKey: []byte(testKey), Model: tc.pin,
				Meter: budget.NewMeter(budget.Budget{Tokens: 1000}, nil, tc.pin)})
			for _, r := range tc.refused {
				if resp, b := send(free, r); resp.StatusCode != http.StatusOK {
					t.Errorf("no usd budget: %s %v: got %d %s, want it forwarded", r.body, r.hdr, resp.StatusCode, b)
				}
			}
		})
	}
}
