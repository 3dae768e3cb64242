package modelgw

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// TestGateway_WouldDenyReporter: anything in the sandbox can reach the
// gateway, so each tool.would_deny records who could have sent it. The attacks: the agent
// posts a forged would_deny with no key, with a guessed key, with a key of the right shape,
// with the hook's via header alone, and tries to claim the gateway after the worker did (to
// plant its own key); each forged report is recorded as reporter "sandbox" (suggest does not
// propose from it), the second claim is refused and changes nothing. Only a report with the
// key the worker claimed with is "worker" (with via hook, "hook"). Failed before: every
// would_deny was recorded alike, whoever sent it.
func TestGateway_WouldDenyReporter(t *testing.T) {
	body := `{"tool":"run_command","decision":"would_deny","reason":"command not granted","args_hash":"` + testArgsHash + `","duration_ms":0,"command":"curl https://x"}`
	workerKey := strings.Repeat("ab", 32)
	otherKey := strings.Repeat("cd", 32)
	g := start(t, Config{APIKey: []byte(testKey), Learn: true})

	// Before any claim, even the right-shaped key proves nothing.
	post := func(hdr http.Header) string {
		t.Helper()
		resp, got := g.do(t, http.MethodPost, "/audit/tool", hdr, body)
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("a would_deny = %d %q, want 204 (recorded)", resp.StatusCode, got)
		}
		w := g.audit.ofKind(entry.ToolWouldDeny)
		d, _ := entry.ReadWouldDeny(entry.ToolWouldDeny, w[len(w)-1])
		return d.Reporter
	}
	if r := post(http.Header{WorkerKeyHeader: {workerKey}}); r != ReporterSandbox {
		t.Errorf("a keyed report before any claim: reporter %q, want sandbox", r)
	}
	for _, bad := range []string{"", "short", strings.Repeat("AB", 32), strings.Repeat("ab", 33), `{"key":"` + workerKey + `","key":"` + otherKey + `"}`} {
		b := `{"key":"` + bad + `"}`
		if strings.HasPrefix(bad, "{") {
			b = bad
		}
		if resp, got := g.do(t, http.MethodPost, "/worker/claim", nil, b); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("claim %s = %d %q, want 400", b, resp.StatusCode, got)
		}
	}
	if resp, got := g.do(t, http.MethodPost, "/worker/claim", nil, `{"key":"`+workerKey+`"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the worker's claim = %d %q, want 204", resp.StatusCode, got)
	}
	if resp, got := g.do(t, http.MethodPost, "/worker/claim", nil, `{"key":"`+otherKey+`"}`); resp.StatusCode != http.StatusConflict {
		t.Fatalf("a second claim = %d %q, want 409", resp.StatusCode, got)
	}
	for name, c := range map[string]struct {
		hdr  http.Header
		want string
	}{
		"no key":              {nil, ReporterSandbox},
		"the second claim's":  {http.Header{WorkerKeyHeader: {otherKey}}, ReporterSandbox},
		"upper case":          {http.Header{WorkerKeyHeader: {strings.ToUpper(workerKey)}}, ReporterSandbox},
		"a prefix":            {http.Header{WorkerKeyHeader: {workerKey[:63]}}, ReporterSandbox},
		"via hook without it": {http.Header{WorkerViaHeader: {"hook"}}, ReporterSandbox},
		"the worker's":        {http.Header{WorkerKeyHeader: {workerKey}}, ReporterWorker},
		"relayed from hook":   {http.Header{WorkerKeyHeader: {workerKey}, WorkerViaHeader: {"hook"}}, ReporterHook},
		"another via":         {http.Header{WorkerKeyHeader: {workerKey}, WorkerViaHeader: {"sandbox"}}, ReporterWorker},
	} {
		if r := post(c.hdr); r != c.want {
			t.Errorf("%s: reporter %q, want %q", name, r, c.want)
		}
	}
	// The key never reaches the audit log.
	g.audit.mu.Lock()
	defer g.audit.mu.Unlock()
	for _, e := range g.audit.entries {
		for _, v := range e.details {
			if s, ok := v.(string); ok && (strings.Contains(s, workerKey) || strings.Contains(s, otherKey)) {
				t.Errorf("a worker key is on record: %s %v", e.kind, e.details)
			}
		}
	}
}
