package modelgw

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
)

// TestGateway_Responses: a Responses API request (what Codex sends) through /model/responses
// reaches the fake with the host's key, not the sandbox's token; the event stream comes back
// whole and its usage is counted and recorded.
func TestGateway_Responses(t *testing.T) {
	fake, err := responsestest.Start(testKey, responsestest.Turns(
		responsestest.Exec("echo hi > out.txt"),
		responsestest.Reply{Text: "done", Usage: responsestest.Usage{InputTokens: 900, CachedTokens: 600, OutputTokens: 55}},
	))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	base := strings.Replace(fake.URL, "127.0.0.1", "model.test", 1)
	h := start(t, Config{ModelBaseURL: base, APIKey: []byte(testKey), Meter: budget.NewMeter(budget.Budget{}, nil, "gpt-5-codex")})
	hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}, "Authorization": {"Bearer agora-sandbox-dummy"}}

	first := `{"model":"gpt-5-codex","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"tools":[{"type":"function","name":"exec_command"}]}`
	resp, body := h.do(t, http.MethodPost, "/model/responses", hdr, first)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("got %d %q %s, want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	for _, ev := range []string{"event: response.created", "event: response.output_item.added", "event: response.function_call_arguments.delta", "event: response.function_call_arguments.done", "event: response.output_item.done", "event: response.completed"} {
		if !strings.Contains(string(body), ev) {
			t.Errorf("stream lacks %q:\n%s", ev, body)
		}
	}
	if !strings.Contains(string(body), `"arguments":"{\"cmd\":\"echo hi > out.txt\"}"`) {
		t.Errorf("stream lacks the exec_command arguments:\n%s", body)
	}
	second := `{"model":"gpt-5-codex","stream":true,"input":[{"type":"function_call","call_id":"call_resp_fake0001_0","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"call_resp_fake0001_0","output":"ok"}]}`
	resp, body = h.do(t, http.MethodPost, "/model/responses", hdr, second)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "event: response.output_text.delta") {
		t.Fatalf("second turn: %d %s", resp.StatusCode, body)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("fake got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Rejected != "" || r.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer "+testKey {
			t.Errorf("request %d: path %s auth %q rejected %q, want /v1/responses with the host's key", i, r.Path, r.Header.Get("Authorization"), r.Rejected)
		}
	}
	if strings.Contains(fake.Bodies(), "agora-sandbox-dummy") || strings.Contains(reqs[0].Header.Get("Authorization"), "dummy") {
		t.Error("the sandbox's token reached the model endpoint")
	}
	// 100 in / 10 out for the default first turn, then the second turn's figures.
	if u := h.gw.Usage(); u.InputTokens != 1000 || u.CachedTokens != 600 || u.OutputTokens != 65 || u.ModelCalls != 2 {
		t.Errorf("Usage = %+v, want 1000 in (600 cached), 65 out, 2 calls", u)
	}
	recs := h.audit.waitGateway(t, 2)
	for _, rec := range recs {
		wantRecord(t, rec, routeModelResponses, decisionAllowed, http.StatusOK, "")
		if rec["path"] != "/v1/responses" {
			t.Errorf("record path %v, want /v1/responses", rec["path"])
		}
	}
	if recs[1]["input_tokens"] != int64(900) || recs[1]["output_tokens"] != int64(55) {
		t.Errorf("second record usage %v/%v, want 900/55", recs[1]["input_tokens"], recs[1]["output_tokens"])
	}
	wantNoKeyInAudit(t, h.audit)
}

// TestGateway_ResponsesRefusals: the route keeps the chat route's rules: POST only, and a
// budget that is spent refuses it before the model is reached.
func TestGateway_ResponsesRefusals(t *testing.T) {
	fake, err := responsestest.Start(testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	base := strings.Replace(fake.URL, "127.0.0.1", "model.test", 1)
	h := start(t, Config{ModelBaseURL: base, APIKey: []byte(testKey), Meter: budget.NewMeter(budget.Budget{ModelCalls: 1}, nil, "gpt-5-codex")})
	hdr := http.Header{"Content-Type": {"application/json"}}
	if resp, _ := h.do(t, http.MethodGet, "/model/responses", nil, ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
	body := `{"model":"gpt-5-codex","stream":true,"input":[]}`
	if resp, b := h.do(t, http.MethodPost, "/model/responses", hdr, body); resp.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d %s", resp.StatusCode, b)
	}
	resp, b := h.do(t, http.MethodPost, "/model/responses", hdr, body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "model call budget spent") {
		t.Errorf("over budget: %d %s, want 400 saying the budget is spent", resp.StatusCode, b)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("fake got %d requests, want 1 (the refused call never leaves)", n)
	}
}
