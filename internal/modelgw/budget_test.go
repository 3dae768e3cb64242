package modelgw

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
)

// chatReply answers a chat completion with usage prompt tokens in and 10 out.
func chatReply(prompt int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"again"},"finish_reason":"stop"}],"usage":{"prompt_tokens":`+strconv.Itoa(prompt)+`,"completion_tokens":10,"total_tokens":0}}`)
	}
}

// anthropicStreamReply answers a Messages request with the real event sequence.
func anthropicStreamReply(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for _, ev := range []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"claude-haiku-4-5","usage":{"input_tokens":40,"cache_read_input_tokens":20,"cache_creation_input_tokens":0,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"more"}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	} {
		io.WriteString(w, ev+"\n\n")
		fl.Flush()
	}
}

type budgetCalls struct {
	mu      sync.Mutex
	details []string
}

func (b *budgetCalls) on(d string) { b.mu.Lock(); b.details = append(b.details, d); b.mu.Unlock() }

func (b *budgetCalls) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.details...)
}

// TestGateway_BudgetStopsChat: a model that keeps being called is refused once the token
// budget is spent, with an OpenAI-shaped error the client shows, audited as denied.
func TestGateway_BudgetStopsChat(t *testing.T) {
	up := newUpstream(t, chatReply(90))
	var calls budgetCalls
	m := budget.NewMeter(budget.Budget{Tokens: 250}, nil, "gpt-4o-mini")
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), Meter: m, OnBudget: calls.on})
	for i := range 3 { // 100, 200, 300 tokens: the third call spends it
		resp, body := h.do(t, http.MethodPost, "/model/chat/completions", http.Header{"Content-Type": {"application/json"}}, `{"model":"gpt-4o-mini"}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions", http.Header{"Content-Type": {"application/json"}}, `{"model":"gpt-4o-mini"}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("fourth call: %d %s, want 400", resp.StatusCode, body)
	}
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "budget_exceeded" || !strings.Contains(e.Error.Message, "token budget spent: 300 of 250 tokens") {
		t.Fatalf("refusal body %s (%v), want an OpenAI error naming the budget", body, err)
	}
	if up.hits.Load() != 3 {
		t.Errorf("upstream saw %d requests, want 3: the refused one never left", up.hits.Load())
	}
	if d := calls.all(); len(d) != 1 || !strings.HasPrefix(d[0], "token budget spent") {
		t.Errorf("OnBudget calls %q", d)
	}
	if u := h.gw.Usage(); u != (budget.Usage{InputTokens: 270, OutputTokens: 30, ModelCalls: 3}) {
		t.Errorf("Usage = %+v", u)
	}
	recs := h.audit.waitGateway(t, 4)
	wantRecord(t, recs[3], routeModelChat, decisionDenied, http.StatusBadRequest, "budget exceeded: token budget spent")
	if recs[0]["input_tokens"] != int64(90) || recs[0]["output_tokens"] != int64(10) {
		t.Errorf("first record holds no usage: %v", recs[0])
	}
	// The model list is no model call: never counted, never refused.
	if resp, _ := h.do(t, http.MethodGet, "/model/models", nil, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("model list after the budget: %d", resp.StatusCode)
	}
}

// TestGateway_BudgetStreams: Anthropic streaming usage is counted and the call and usd
// budgets stop the next call with an Anthropic-shaped error.
func TestGateway_BudgetStreams(t *testing.T) {
	prices := budget.Prices{"claude-haiku-4-5": {InputPerMTok: 1000, OutputPerMTok: 5000, CachedInputPerMTok: 100}}
	for _, tc := range []struct {
		name  string
		b     budget.Budget
		calls int
		want  string
	}{
		{"calls", budget.Budget{ModelCalls: 2}, 2, "model call budget spent: 2 of 2 calls"},
		// A call: 40 fresh at $0.001, 20 cached at $0.0001, 15 out at $0.005 = $0.117.
		{"usd", budget.Budget{USD: 0.15}, 2, "usd budget spent: $0.234 of $0.15"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, anthropicStreamReply)
			h := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: APIAnthropic, APIKey: []byte(testKey), Meter: budget.NewMeter(tc.b, prices, "claude-haiku-4-5")})
			hdr := http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {"2023-06-01"}}
			for i := range tc.calls {
				resp, body := h.do(t, http.MethodPost, "/anthropic/v1/messages", hdr, `{"model":"claude-haiku-4-5","stream":true}`)
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "message_stop") {
					t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
				}
			}
			resp, body := h.do(t, http.MethodPost, "/anthropic/v1/messages", hdr, `{"model":"claude-haiku-4-5","stream":true}`)
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Type != "error" || !strings.Contains(e.Error.Message, tc.want) {
				t.Fatalf("refusal %d %s, want an Anthropic error saying %q", resp.StatusCode, body, tc.want)
			}
			if u := h.gw.Usage(); u.InputTokens != 120 || u.CachedTokens != 40 || u.OutputTokens != 30 || u.ModelCalls != 2 {
				t.Errorf("Usage = %+v", u)
			}
		})
	}
}

// TestGateway_BudgetUpstreamErrorNotSpent: an upstream error carries no usage and does not
// spend a token budget (only a successful response without usage does, see budget.Meter).
func TestGateway_BudgetUpstreamErrorNotSpent(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"overloaded"}}`)
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), Meter: budget.NewMeter(budget.Budget{Tokens: 10}, nil, "")})
	for range 2 {
		if resp, _ := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("got %d, want the upstream's 503", resp.StatusCode)
		}
	}
}

// TestGateway_BudgetNoUsageFailsClosed: a successful response that reports no usage (a
// stream without include_usage) cannot be counted against a token budget: the next call is
// refused.
func TestGateway_BudgetNoUsageFailsClosed(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"delta":{"content":"x"}}]}`+"\n\ndata: [DONE]\n\n")
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), Meter: budget.NewMeter(budget.Budget{Tokens: 1000}, nil, "")})
	h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "reported no usage") {
		t.Fatalf("got %d %s, want the budget refusal", resp.StatusCode, body)
	}
}

// BenchmarkGateway_ModelRequest is one chat completion through the gateway, without a
// budget (the baseline) and with one, for a small and a large request body: the budget check
// reads no body, so its cost does not grow with it (the model pin's strict read of the body
// does, in both).
func BenchmarkGateway_ModelRequest(b *testing.B) {
	up := newUpstream(b, chatReply(1))
	for _, size := range []int{1 << 10, 1 << 20} {
		body := `{"model":"gpt-4o-mini","pad":"` + strings.Repeat("x", size) + `"}`
		for _, withBudget := range []bool{false, true} {
			name := "no-budget"
			if withBudget {
				name = "budget"
			}
			b.Run(name+"/body="+strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
				cfg := Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), RequestsPerSecond: 1e9, RequestBurst: 1 << 30, MaxAuditEntries: 1 << 30, MaxAuditBytes: 1 << 40}
				if withBudget {
					cfg.Meter = budget.NewMeter(budget.Budget{Tokens: 1 << 50, USD: 1e5, ModelCalls: 1 << 39}, budget.Prices{"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.6}}, "gpt-4o-mini")
				}
				h := start(b, cfg)
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if resp, rb := h.do(b, http.MethodPost, "/model/chat/completions", nil, body); resp.StatusCode != http.StatusOK {
						b.Fatalf("%d %s", resp.StatusCode, rb)
					}
				}
			})
		}
	}
}

// TestGateway_BudgetCallsUnderConcurrency is the attack on the call budget: with 3 calls
// allowed, the sandbox sends 12 at once (the upstream holds each one), hoping all pass the
// check before any is counted. Exactly 3 reach the model; the rest are refused.
func TestGateway_BudgetCallsUnderConcurrency(t *testing.T) {
	hold := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-hold
		chatReply(1)(w, r)
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), MaxConcurrent: 16,
		Meter: budget.NewMeter(budget.Budget{ModelCalls: 3}, nil, "")})
	var wg sync.WaitGroup
	codes := make(chan int, 12)
	for range 12 {
		wg.Go(func() {
			resp, _ := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
			codes <- resp.StatusCode
		})
	}
	// The refusals come back while the three allowed calls are held upstream.
	refused := 0
	for refused < 9 {
		if c := <-codes; c != http.StatusBadRequest {
			t.Fatalf("a call answered %d before the held ones were released", c)
		}
		refused++
	}
	close(hold)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("an allowed call answered %d", c)
		}
	}
	if n := up.hits.Load(); n != 3 {
		t.Errorf("upstream saw %d calls, want 3", n)
	}
	if u := h.gw.Usage(); u.ModelCalls != 3 {
		t.Errorf("usage counts %d calls, want 3", u.ModelCalls)
	}
}

// TestGateway_BudgetCountsACutStream: a stream the upstream cuts after message_start still
// counts the input it reported (the model was paid for it), and the cut reaches the client.
func TestGateway_BudgetCountsACutStream(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\n"+`data: {"type":"message_start","message":{"model":"claude-haiku-4-5","usage":{"input_tokens":70,"output_tokens":1}}}`+"\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the upstream connection drops mid-stream
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), ModelAPI: APIAnthropic, APIKey: []byte(testKey),
		Meter: budget.NewMeter(budget.Budget{Tokens: 50}, nil, "")})
	hdr := http.Header{"Anthropic-Version": {"2023-06-01"}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/anthropic/v1/messages", strings.NewReader(`{"model":"m"}`))
	req.Header = hdr
	if resp, err := h.client.Do(req); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Error("the cut stream reached the client whole")
		}
	}
	// The request's record is written after its usage is counted.
	rec := h.audit.waitGateway(t, 1)[0]
	if rec["decision"] != decisionError || rec["input_tokens"] != int64(70) {
		t.Errorf("record of the cut stream %v", rec)
	}
	if u := h.gw.Usage(); u.InputTokens != 70 || u.OutputTokens != 1 || u.ModelCalls != 1 {
		t.Fatalf("usage %+v, want the 70 input tokens message_start reported", u)
	}
	resp, body := h.do(t, http.MethodPost, "/anthropic/v1/messages", hdr, `{"model":"m"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "token budget spent: 71 of 50") {
		t.Fatalf("next call %d %s, want the budget refusal", resp.StatusCode, body)
	}
}

// TestGateway_BudgetRefusedRequestCostsNoCall: a model request the gateway refuses before
// sending it (an oversized body, a bad header) takes no call from the budget.
func TestGateway_BudgetRefusedRequestCostsNoCall(t *testing.T) {
	up := newUpstream(t, chatReply(1))
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), Meter: budget.NewMeter(budget.Budget{ModelCalls: 1}, nil, "")})
	if resp, _ := h.do(t, http.MethodPost, "/model/chat/completions", nil, strings.Repeat("x", maxRequestBody+1)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", resp.StatusCode)
	}
	if u := h.gw.Usage(); u.ModelCalls != 0 {
		t.Fatalf("a refused request counted %d calls", u.ModelCalls)
	}
	if resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("the one allowed call: %d %s", resp.StatusCode, body)
	}
}
