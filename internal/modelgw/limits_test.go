package modelgw

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
)

func TestGateway_OversizeRequestsRefused(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	h := start(t, Config{ModelBaseURL: up.at("model.test"), Egress: grant.MustEgressRules("granted.test")})
	refused := map[string]int{} // by route: oversize bodies are counted, not recorded alone
	for _, tc := range []struct {
		name, path, body string
		chunked          bool
		route            string
	}{
		{"Model", "/model/chat/completions", strings.Repeat("m", maxRequestBody+1), false, routeModelChat},
		{"ModelChunked", "/model/chat/completions", strings.Repeat("m", maxRequestBody+1), true, routeModelChat},
		{"Fetch", "/fetch", `{"url":"http://granted.test/` + strings.Repeat("a", maxFetchRequest) + `"}`, false, routeFetch},
		{"ToolAudit", "/audit/tool", strings.Repeat(" ", maxToolAuditRequest+1), true, routeAuditTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked, no Content-Length
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway"+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(errorOf(t, b), "byte limit") {
				t.Errorf("got %d %q, want 413", resp.StatusCode, b)
			}
			refused[tc.route]++
			wantRefused(t, h, tc.route, http.StatusRequestEntityTooLarge, refused[tc.route])
		})
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
}

func TestGateway_RateLimit(t *testing.T) {
	h := start(t, Config{RequestsPerSecond: 0.001, RequestBurst: 3})
	body := `{"tool":"read_file","decision":"allowed","args_hash":"` + testArgsHash + `"}`
	var statuses []int
	for range 5 {
		resp, _ := h.do(t, http.MethodPost, "/audit/tool", nil, body)
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	want := []int{204, 204, 204, 429, 429}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("got statuses %v, want %v", statuses, want)
	}
	h.audit.waitGateway(t, 3)
	wantRefused(t, h, routeAuditTool, http.StatusTooManyRequests, 2)
	if n := len(h.audit.ofKind(entry.ToolCall)); n != 3 {
		t.Errorf("got %d tool.call records, want 3 (the rate-limited reports are not recorded)", n)
	}
}

func TestGateway_ConcurrencyLimit(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 2)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "{}")
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), MaxConcurrent: 2})
	done := make(chan int, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, "http://gateway/model/chat/completions", strings.NewReader(`{"model":"m"}`))
			resp, err := h.client.Do(req)
			if err != nil {
				done <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	<-arrived
	<-arrived
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, body), "more than 2 requests in flight") {
		t.Errorf("third concurrent request: got %d %q, want 503", resp.StatusCode, body)
	}
	close(release) // before any check can stop the test with the upstream still waiting
	wantRefused(t, h, routeModelChat, http.StatusServiceUnavailable, 1)
	for range 2 {
		if s := <-done; s != http.StatusOK {
			t.Errorf("an admitted request got %d, want 200", s)
		}
	}
	// Slots are given back: the next request is admitted.
	if resp, _ := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("after the others finished: got %d, want 200", resp.StatusCode)
	}
	h.audit.waitGateway(t, 3)
}
