package mcpserver_test

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// TestRedTeam28S3_CachedDescribeKeepsEveryCheck attacks the MCP hot path's cache (a
// terminal dispatch's describe answer is encoded once and served from memory): every call
// that takes it must still pass each check the first one did. Over real HTTP, a finished
// dispatch is described three times (the second and third from the cache): each is read
// fresh from the dispatcher port and audited as allowed, and the answers are the same. With
// the audit log failing, the cached answer is refused and none of it is sent. A foreign Host
// or Origin, no token or a wrong one, and the rate limit refuse it too, before the tool:
// nothing is read and nothing audited for them.
func TestRedTeam28S3_CachedDescribeKeepsEveryCheck(t *testing.T) {
	f, gets := countingFixture()
	token := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(token), Limits: mcpserver.Limits{Rate: 0.0001, Burst: 10}})
	_, port, _ := net.SplitHostPort(addr)
	auth := map[string]string{"Authorization": "Bearer " + token}
	describe := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agora_dispatch_describe","arguments":{"id":"` + dispatchID + `"}}}`
	var answers []string
	for i := range 3 {
		code, _, body := post(t, addr, "/mcp", auth, describe)
		if code != http.StatusOK || !strings.Contains(body, dispatchID) || strings.Contains(body, `"isError":true`) {
			t.Fatalf("describe %d: %d %s", i, code, body)
		}
		answers = append(answers, body)
	}
	if answers[1] != answers[0] || answers[2] != answers[0] {
		t.Errorf("the cached answers differ from the first:\n%s\n%s\n%s", answers[0], answers[1], answers[2])
	}
	if n := gets.Load(); n != 3 {
		t.Errorf("the dispatcher port was read %d times for 3 describes, want 3 (each call reads the record)", n)
	}
	audited := func() int {
		n := 0
		for _, e := range f.audit.all() {
			if e.Kind == "mcp.tool.call" && e.Details["tool"] == "agora_dispatch_describe" && e.Details["decision"] == "allowed" && e.Actor == "reader" {
				n++
			}
		}
		return n
	}
	if n := audited(); n != 3 {
		t.Fatalf("%d allowed describe entries for 3 calls, want 3: %+v", n, f.audit.all())
	}

	f.audit.mu.Lock()
	f.audit.fail = errors.New("disk full")
	f.audit.mu.Unlock()
	code, _, body := post(t, addr, "/mcp", auth, describe)
	if code != http.StatusOK || !strings.Contains(body, "could not record this call") || strings.Contains(body, "writer@sha256") {
		t.Errorf("describe with the audit log failing: %d %s; want the refusal and nothing of the record", code, body)
	}
	f.audit.mu.Lock()
	f.audit.fail = nil
	f.audit.mu.Unlock()

	before, readsBefore := len(f.audit.all()), gets.Load()
	for _, tt := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"foreign host", map[string]string{"Authorization": "Bearer " + token, "Host": "evil.example.com:" + port}, http.StatusForbidden},
		{"foreign origin", map[string]string{"Authorization": "Bearer " + token, "Origin": "https://evil.example.com"}, http.StatusForbidden},
		{"no token", map[string]string{}, http.StatusUnauthorized},
		{"wrong token", map[string]string{"Authorization": "Bearer " + newToken(t)}, http.StatusUnauthorized},
	} {
		if code, _, body := post(t, addr, "/mcp", tt.headers, describe); code != tt.want || strings.Contains(body, "writer@sha256") {
			t.Errorf("%s: %d %s, want %d and nothing of the record", tt.name, code, body, tt.want)
		}
	}
	// The burst of 10 is spent by the 4 describes above and what follows: the rest are 429.
	codes := map[int]int{}
	for range 8 {
		code, _, _ := post(t, addr, "/mcp", auth, describe)
		codes[code]++
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusOK] > 6 {
		t.Errorf("8 describes after a burst of 10 was mostly spent: %v, want the rest refused 429", codes)
	}
	if got, reads := len(f.audit.all())-before, gets.Load()-readsBefore; int64(got) != reads || got != codes[http.StatusOK] {
		t.Errorf("after the refusals: %d audit entries, %d reads, %d answered; want one entry and one read per answered call", got, reads, codes[http.StatusOK])
	}
}
