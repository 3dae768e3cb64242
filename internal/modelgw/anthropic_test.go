package modelgw

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGateway_AnthropicInjectsKey(t *testing.T) {
	type seen struct {
		path, query, body string
		header            http.Header
	}
	got := make(chan seen, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, r.URL.RawQuery, string(b), r.Header.Clone()}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_1")
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "9")
		io.WriteString(w, `{"id":"msg_1","type":"message"}`)
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: APIAnthropic, APIKey: []byte(testKey)})
	reqBody := `{"model":"claude","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	resp, body := h.do(t, http.MethodPost, "/anthropic/v1/messages?beta=true", http.Header{
		"Content-Type":      {"application/json"},
		"Anthropic-Version": {"2023-06-01"},
		"Anthropic-Beta":    {"interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"},
		"Authorization":     {"Bearer relay-token-from-the-sandbox"},
		"X-Api-Key":         {"sk-ant-sandbox-forged-0000"},
		"Cookie":            {"session=abc"},
	}, reqBody)
	if resp.StatusCode != http.StatusOK || string(body) != `{"id":"msg_1","type":"message"}` {
		t.Fatalf("got %d %q, want 200 and the upstream body", resp.StatusCode, body)
	}
	if resp.Header.Get("Request-Id") != "req_1" || resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "9" {
		t.Errorf("got response headers %v, want Request-Id and the rate-limit header passed", resp.Header)
	}
	s := <-got
	if s.path != "/v1/messages" || s.query != "" || s.body != reqBody {
		t.Errorf("upstream got %s ?%s body %q, want /v1/messages, no query, the request body", s.path, s.query, s.body)
	}
	if k := s.header.Get("X-Api-Key"); k != testKey {
		t.Errorf("upstream got x-api-key %q, want the configured key", k)
	}
	if v := s.header.Get("Anthropic-Version"); v != "2023-06-01" {
		t.Errorf("upstream got anthropic-version %q, want the sandbox's", v)
	}
	var names []string
	for k := range s.header {
		names = append(names, k)
	}
	slices.Sort(names)
	want := []string{"Accept-Encoding", "Anthropic-Beta", "Anthropic-Version", "Content-Length", "Content-Type", "User-Agent", "X-Api-Key"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("upstream request headers (-want +got):\n%s", diff)
	}
	rec := h.audit.lastGateway(t, 1)
	wantRecord(t, rec, routeAnthropicMessages, decisionAllowed, http.StatusOK, "")
	if rec["path"] != "/v1/messages" {
		t.Errorf("got record path %v, want /v1/messages", rec["path"])
	}
	wantNoKeyInAudit(t, h.audit)
}

func TestGateway_AnthropicRoutes(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	for _, tc := range []struct {
		name, api, path string
		hdr             http.Header
		status          int
		route, reason   string
	}{
		{"CountTokens", APIAnthropic, "/anthropic/v1/messages/count_tokens", nil, http.StatusOK, routeAnthropicCount, ""},
		{"OtherPath", APIAnthropic, "/anthropic/v1/complete", nil, http.StatusNotFound, routeAnthropicOther, "no such route"},
		{"OpenAIRouteOnAnthropic", APIAnthropic, "/model/chat/completions", nil, http.StatusNotFound, routeModelChat, "speaks the anthropic API"},
		{"AnthropicRouteOnOpenAI", APIOpenAI, "/anthropic/v1/messages", nil, http.StatusNotFound, routeAnthropicMessages, "speaks the openai API"},
		{"BadVersionHeader", APIAnthropic, "/anthropic/v1/messages", http.Header{"Anthropic-Version": {"2023-06-01; key=x"}}, http.StatusBadRequest, routeAnthropicMessages, "Anthropic-Version"},
		{"LongBetaHeader", APIAnthropic, "/anthropic/v1/messages", http.Header{"Anthropic-Beta": {strings.Repeat("a", maxForwardedValue+1)}}, http.StatusBadRequest, routeAnthropicMessages, "Anthropic-Beta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: tc.api, APIKey: []byte(testKey)})
			resp, body := h.do(t, http.MethodPost, tc.path, tc.hdr, `{"model":"m"}`)
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %q, want %d", resp.StatusCode, body, tc.status)
			}
			decision := decisionAllowed
			if tc.status != http.StatusOK {
				decision = decisionDenied
				if msg := errorOf(t, body); !strings.Contains(msg, tc.reason) {
					t.Errorf("got error %q, want it to contain %q", msg, tc.reason)
				}
			}
			if decision == decisionDenied { // refusals the sandbox can provoke at will are counted
				wantRefused(t, h, tc.route, tc.status, 1)
				return
			}
			wantRecord(t, h.audit.lastGateway(t, 1), tc.route, decision, tc.status, tc.reason)
		})
	}
}

func TestListen_BadModelAPI(t *testing.T) {
	_, err := Listen(t.Context(), shortDir(t)+"/gw.sock", Config{DispatchID: testDispatchID, Role: testRole,
		Dialer: loopbackDialer(), Audit: &fakeAuditor{}, ModelAPI: "cohere"})
	if err == nil || !strings.Contains(err.Error(), `model API "cohere"`) {
		t.Fatalf("got %v, want the model API refused", err)
	}
}
