package modelgw

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// validReport is a /audit/tool body the gateway accepts: two entries (tool.call and
// tool.gateway) each time.
const validReport = `{"tool":"read_file","decision":"allowed","reason":"granted","args_hash":"` + testArgsHash + `","duration_ms":1}`

// limitCalls records the details OnLimit is called with.
type limitCalls struct {
	mu      sync.Mutex
	details []string
}

func (l *limitCalls) onLimit(detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.details = append(l.details, detail)
}

func (l *limitCalls) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.details...)
}

// TestGateway_AuditBudgetEntries: with a budget of 7 entries, three tool reports (six
// entries) fit; the fourth does not, and instead the final entry says the budget is spent,
// OnLimit is called once, the report is answered 503 (the worker fails the call closed) and
// every later request is refused without an entry, refusals the sandbox provokes included.
func TestGateway_AuditBudgetEntries(t *testing.T) {
	var calls limitCalls
	h := start(t, Config{MaxAuditEntries: 7, OnLimit: calls.onLimit, RefusalInterval: forever})
	for i := range 3 {
		if resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, validReport); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("report %d: got %d %q, want 204", i, resp.StatusCode, body)
		}
		h.audit.waitGateway(t, i+1)
	}
	if got := calls.all(); len(got) != 0 {
		t.Fatalf("OnLimit called %v within the budget", got)
	}
	resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, validReport)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, body), "not kept") {
		t.Errorf("report over the budget: got %d %q, want 503 not kept", resp.StatusCode, body)
	}
	for _, path := range []string{"/audit/tool", "/nope", "/model/chat/completions"} {
		resp, body := h.do(t, http.MethodPost, path, nil, validReport)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, body), "audit budget is spent") {
			t.Errorf("%s after the budget: got %d %q, want 503 naming the budget", path, resp.StatusCode, body)
		}
	}
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	all := h.audit.all()
	if len(all) != 7 {
		t.Fatalf("got %d entries, want the budget's 7: %v", len(all), all)
	}
	last := all[len(all)-1]
	want := map[string]any{
		"dispatch": testDispatchID, "role": testRole, "entries": int64(6),
		"max_entries": int64(7), "max_bytes": int64(DefaultMaxAuditBytes), "decision": decisionDenied,
		"reason": "the gateway's audit budget of 7 entries is spent",
	}
	if diff := cmp.Diff(want, last.details, cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "bytes" })); last.kind != entry.ToolGatewayBudget || diff != "" {
		t.Errorf("last entry %s (-want +got):\n%s", last.kind, diff)
	}
	if got := calls.all(); !cmp.Equal(got, []string{"the gateway's audit budget of 7 entries is spent"}) {
		t.Errorf("OnLimit called with %q, want once naming the entry budget", got)
	}
}

// TestGateway_AuditBudgetBytes: the byte budget binds on its own, with room kept for the
// final entry.
func TestGateway_AuditBudgetBytes(t *testing.T) {
	var calls limitCalls
	const budget = 4 << 10
	h := start(t, Config{MaxAuditBytes: budget, OnLimit: calls.onLimit})
	for i := 0; len(calls.all()) == 0; i++ {
		if i == 100 {
			t.Fatal("100 reports did not spend a 4 KiB budget")
		}
		h.do(t, http.MethodPost, "/audit/tool", nil, validReport)
	}
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	all := h.audit.all()
	var used int64
	for _, e := range all[:len(all)-1] {
		used += entrySize(e.kind, e.details)
	}
	last := all[len(all)-1]
	if last.kind != entry.ToolGatewayBudget || last.details["bytes"] != used {
		t.Errorf("last entry %s %v, want %s saying %d bytes were used", last.kind, last.details, entry.ToolGatewayBudget, used)
	}
	if size := entrySize(last.kind, last.details); used > budget-finalEntryReserve || size > finalEntryReserve {
		t.Errorf("entries used %d bytes and the final one %d, want at most %d and %d", used, size, budget-finalEntryReserve, finalEntryReserve)
	}
	if got := calls.all(); len(got) != 1 || !strings.Contains(got[0], "4096 bytes") {
		t.Errorf("OnLimit called with %q, want once naming the byte budget", got)
	}
}

// TestGateway_AuditBudgetConcurrent: many reports at once spend the budget exactly: no more
// entries than it allows, one final entry and it is the last, OnLimit called once.
func TestGateway_AuditBudgetConcurrent(t *testing.T) {
	var calls limitCalls
	h := start(t, Config{MaxAuditEntries: 51, OnLimit: calls.onLimit, RequestsPerSecond: 1e9, RequestBurst: 1e9, RefusalInterval: forever})
	statuses := h.flood(t, 16, 20, func(i int) (string, string, string) {
		if i%4 == 3 {
			return http.MethodGet, "/nope", "" // counted refusals are charged too, when flushed
		}
		return http.MethodPost, "/audit/tool", validReport
	})
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	all := h.audit.all()
	if len(all) > 51 {
		t.Errorf("got %d entries, want at most the budget's 51", len(all))
	}
	for i, e := range all {
		if (e.kind == entry.ToolGatewayBudget) != (i == len(all)-1) {
			t.Errorf("entry %d of %d is %s: want one %s, the last", i, len(all), e.kind, entry.ToolGatewayBudget)
		}
	}
	if got := calls.all(); len(got) != 1 {
		t.Errorf("OnLimit called %d times, want once", len(got))
	}
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Errorf("statuses %v: want requests refused once the budget was spent", statuses)
	}
}

// TestGateway_RefusalInterval: counted refusals are written every interval without waiting
// for Close, one entry per route and reason, and each interval starts a new count. The three
// refusals of one route may straddle an interval at load (counts 2 and 1),
// so their entries are summed: each interval's count is written once, never again.
func TestGateway_RefusalInterval(t *testing.T) {
	h := start(t, Config{RefusalInterval: 10 * time.Millisecond})
	waitReason := func(reason string, n int64) []map[string]any {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			var got []map[string]any
			var sum int64
			for _, e := range h.audit.ofKind(entry.ToolGatewayRefused) {
				if e["reason"] == reason {
					got = append(got, e)
					c, _ := e["count"].(int64)
					sum += c
				}
			}
			if sum >= n || time.Now().After(deadline) {
				if sum != n {
					t.Fatalf("%s entries count %d refusals, want %d: %v", reason, sum, n, got)
				}
				return got
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 3 {
		h.do(t, http.MethodGet, "/nope", nil, "")
	}
	firsts := waitReason("no-route", 3)
	h.do(t, http.MethodGet, "/fetch", nil, "")
	seconds := waitReason("method-not-allowed", 1)
	if again := waitReason("no-route", 3); len(again) != len(firsts) {
		t.Errorf("no-route entries went from %d to %d with no new refusal: a flushed count was written again", len(firsts), len(again))
	}
	ignoreTimes := cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "first" || k == "last" || k == "count" })
	type check struct{ got, want map[string]any }
	var checks []check
	for _, e := range firsts {
		checks = append(checks, check{e, map[string]any{"dispatch": testDispatchID, "role": testRole, "route": routeUnknown, "reason": "no-route",
			"status": http.StatusNotFound, "decision": decisionDenied}})
	}
	checks = append(checks, check{seconds[0], map[string]any{"dispatch": testDispatchID, "role": testRole, "route": routeFetch, "reason": "method-not-allowed",
		"status": http.StatusMethodNotAllowed, "decision": decisionDenied}})
	for _, tc := range checks {
		if diff := cmp.Diff(tc.want, tc.got, ignoreTimes); diff != "" {
			t.Errorf("aggregate (-want +got):\n%s", diff)
		}
		first, err1 := time.Parse(time.RFC3339Nano, tc.got["first"].(string))
		last, err2 := time.Parse(time.RFC3339Nano, tc.got["last"].(string))
		if err1 != nil || err2 != nil || last.Before(first) {
			t.Errorf("aggregate times %v..%v, want RFC 3339, first not after last", tc.got["first"], tc.got["last"])
		}
	}
	if n := len(h.audit.ofKind(entry.ToolGateway)); n != 0 {
		t.Errorf("got %d entries of their own for counted refusals, want 0", n)
	}
}
