package modelgw

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// forever is a refusal interval longer than any test: only Close (or a test's flush) writes
// the counted refusals.
const forever = time.Hour

// routeNames and tallyReasons are every route and every reason a refusal can be counted
// under: at most one aggregate each per interval.
var (
	routeNames = []string{"model.chat_completions", "model.models", "model.unknown", "anthropic.messages",
		"anthropic.count_tokens", "anthropic.unknown", "fetch", "audit.tool", "unknown"}
	tallyReasons = []string{"bad-request", "no-route", "method-not-allowed", "too-large", "rate-limited", "busy", "closing"}
)

// flood sends n requests from each of workers goroutines, request i of a goroutine built by
// mk(i), and returns how many answers had each status.
func (h *harness) flood(t testing.TB, workers, n int, mk func(i int) (method, path, body string)) map[int]int64 {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int64{}
	var failed atomic.Int64
	var firstErr error // the first, so a failure says which request and why
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range n {
				method, path, body := mk(i)
				req, err := http.NewRequest(method, "http://gateway"+path, strings.NewReader(body))
				if err == nil {
					var resp *http.Response
					if resp, err = h.client.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						mu.Lock()
						statuses[resp.StatusCode]++
						mu.Unlock()
						continue
					}
				}
				failed.Add(1)
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%s %s (%d bytes): %w", method, path, len(body), err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d flood requests got no answer; the first: %v", n, firstErr)
	}
	return statuses
}

// TestGateway_FloodBoundsAudit: 32 goroutines in a sandbox
// hammering the gateway with requests it refuses (unknown routes, wrong methods, malformed
// and oversize bodies, over the concurrency and rate limits) wrote one audit entry per
// request. Now each kind of refusal is counted and written once per interval: with an
// interval longer than the test, the audit holds one entry per route and reason, whatever
// the number of requests, and the counts add up to the requests refused.
func TestGateway_FloodBoundsAudit(t *testing.T) {
	const workers, perWorker = 32, 40
	t.Run("Malformed", func(t *testing.T) {
		h := start(t, Config{RequestsPerSecond: 1e9, RequestBurst: 1e9, MaxConcurrent: 4, RefusalInterval: forever})
		kinds := []struct{ method, path, body string }{
			{http.MethodGet, "/nope", ""},
			{http.MethodPost, "/model/embeddings", "{}"},
			{http.MethodGet, "/fetch", ""},
			{http.MethodPost, "/fetch", `{"url":`},
			{http.MethodPost, "/fetch", `{"url":"http://granted.test/` + strings.Repeat("a", maxFetchRequest) + `"}`},
			{http.MethodPost, "/audit/tool", `{"tool":"x"}`},
		}
		statuses := h.flood(t, workers, perWorker, func(i int) (string, string, string) {
			k := kinds[i%len(kinds)]
			return k.method, k.path, k.body
		})
		wantFloodBounded(t, h, statuses, workers*perWorker)
	})
	t.Run("RateLimited", func(t *testing.T) {
		h := start(t, Config{RequestsPerSecond: 0.001, RequestBurst: 4, RefusalInterval: forever})
		body := `{"tool":"read_file","decision":"allowed","args_hash":"` + testArgsHash + `"}`
		statuses := h.flood(t, workers, perWorker, func(int) (string, string, string) {
			return http.MethodPost, "/audit/tool", body
		})
		if statuses[http.StatusNoContent] != 4 {
			t.Errorf("got %d reports served, want the burst of 4 (statuses %v)", statuses[http.StatusNoContent], statuses)
		}
		wantFloodBounded(t, h, statuses, workers*perWorker)
	})
}

// wantFloodBounded closes the gateway and checks its audit: every served request has its own
// entries (a tool report two), the refused ones are in at most one aggregate per route and
// reason, and the aggregates count exactly the refused requests.
func wantFloodBounded(t *testing.T, h *harness, statuses map[int]int64, total int) {
	t.Helper()
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	var served, refused int64
	for status, n := range statuses {
		if status < 400 {
			served += n
		} else {
			refused += n
		}
	}
	if served+refused != int64(total) {
		t.Fatalf("got %d answers, want %d", served+refused, total)
	}
	entries := h.audit.all()
	// A served tool report is two entries (tool.call and tool.gateway); 63 is every route
	// times every reason a refusal can be counted under.
	if bound := 2*served + int64(len(routeNames)*len(tallyReasons)); int64(len(entries)) > bound {
		t.Fatalf("%d requests (%d refused) wrote %d audit entries, want at most %d", total, refused, len(entries), bound)
	}
	var counted int64
	keys := map[string]bool{}
	for _, d := range h.audit.ofKind(entry.ToolGatewayRefused) {
		key := d["route"].(string) + " " + d["reason"].(string)
		if keys[key] {
			t.Errorf("two aggregates for %s in one interval", key)
		}
		keys[key] = true
		counted += d["count"].(int64)
		if d["dispatch"] != testDispatchID || d["role"] != testRole || d["first"] == "" || d["last"] == "" {
			t.Errorf("aggregate %v lacks the dispatch, role or times", d)
		}
	}
	if counted != refused {
		t.Errorf("aggregates count %d refusals, want the %d refused requests (statuses %v)", counted, refused, statuses)
	}
	for _, d := range h.audit.ofKind(entry.ToolGateway) {
		if s := d["status"].(int); s >= 400 {
			t.Errorf("a refused request has its own entry: %v", d)
		}
	}
}
