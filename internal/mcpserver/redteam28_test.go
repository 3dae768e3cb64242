package mcpserver_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// The progress split now skips decoding a body that holds neither
// "progressToken" nor a \u escape. These send hostile bodies to the real HTTP server.

// watchCall is a tools/call of agora_orchestrator_watch with meta spliced into its params.
func watchCall(meta string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + meta + `"name":"agora_orchestrator_watch","arguments":{"run_id":"run-1"}}}`
}

// TestRedTeam28_ProgressSplitHostileBodies: whatever spelling hides a progress token, a call
// whose token the SDK acts on (it sends progress for it) is answered as an event stream, so no
// progress is lost to a plain JSON answer; every call is answered once, with its result.
// Spellings the SDK does not read as a token (another case, Unicode case folding, a
// duplicate whose last value is null) get no progress, whichever way the split routes them.
func TestRedTeam28_ProgressSplitHostileBodies(t *testing.T) {
	f := newFixture()
	f.orch = &slowWatch{wait: 1100 * time.Millisecond}
	tok := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(tok)})
	h := map[string]string{"Authorization": "Bearer " + tok, "Mcp-Protocol-Version": "2025-11-25"}
	const none, progress = false, true
	tests := []struct {
		name, body string
		progress   bool
	}{
		{"plain", watchCall(``), none},
		{"token", watchCall(`"_meta":{"progressToken":"p1"},`), progress},
		{"escaped p", watchCall(`"_meta":{"\u0070rogressToken":"p1"},`), progress},
		{"escaped meta", watchCall(`"\u005fmeta":{"progressToken":"p1"},`), progress},
		{"all escaped", watchCall(`"\u005f\u006d\u0065\u0074\u0061":{"\u0070\u0072\u006f\u0067\u0072\u0065\u0073\u0073\u0054\u006f\u006b\u0065\u006e":"p1"},`), progress},
		{"upper case key", watchCall(`"_meta":{"PROGRESSTOKEN":"p1"},`), none},
		{"kelvin sign", watchCall(`"_meta":{"progressTo\u212aen":"p1"},`), none},
		{"long s raw", watchCall(`"_meta":{"progreſſToken":"p1"},`), none},
		{"duplicate token then null", watchCall(`"_meta":{"progressToken":"p1","progressToken":null},`), none},
		{"duplicate null then token", watchCall(`"_meta":{"progressToken":null,"progressToken":"p1"},`), progress},
		{"duplicate meta", watchCall(`"_meta":{"progressToken":"p1"},"_meta":{},`), progress},
		{"duplicate meta other order", watchCall(`"_meta":{},"_meta":{"progressToken":"p1"},`), progress},
		{"token object", watchCall(`"_meta":{"progressToken":{"a":1}},`), progress},
		{"upper params beside params", `{"jsonrpc":"2.0","id":7,"method":"tools/call","PARAMS":{"_meta":{"progressToken":"p1"}},"params":{"name":"agora_orchestrator_watch","arguments":{"run_id":"run-1"}}}`, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := post(t, addr, "/mcp", h, tt.body)
			if code != http.StatusOK || strings.Count(body, `"id":7,"result"`) != 1 || !strings.Contains(body, `"state\":\"done\"`) {
				t.Fatalf("got %d %s, want 200 with the watch's one result:\n%.600s", code, hdr.Get("Content-Type"), body)
			}
			got := strings.Contains(body, "notifications/progress")
			if got != tt.progress {
				t.Errorf("progress sent = %v, want %v:\n%.600s", got, tt.progress, body)
			}
			if got && !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
				t.Errorf("progress in a %q answer", hdr.Get("Content-Type"))
			}
		})
	}
	// A progress token in _meta of the arguments is no token: the strict arguments refuse it.
	code, _, body := post(t, addr, "/mcp", h, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agora_orchestrator_watch","arguments":{"run_id":"run-1","_meta":{"progressToken":"p1"}}}}`)
	if code != http.StatusOK || !strings.Contains(body, `unknown argument \"_meta\"`) || strings.Contains(body, "notifications/progress") {
		t.Errorf("a token nested in the arguments: got %d %.400s, want the unknown argument refused", code, body)
	}
	// A body over the cap is refused whether or not the pre-check would skip its decode.
	for _, pad := range []string{strings.Repeat("x", 3<<20), strings.Repeat(`\u0070`, 1<<20)} {
		big := watchCall(`"_meta":{"progressToken":"p1","pad":"` + pad + `"},`)
		if code, _, _ := post(t, addr, "/mcp", h, big); code != http.StatusRequestEntityTooLarge {
			t.Errorf("a %d-byte body: got %d, want 413", len(big), code)
		}
	}
}

// TestRedTeam28_TrailingDataRefused: a POST body is one JSON-RPC message; a body with
// anything after it is not valid JSON and is refused, not acted on. Failed before: the SDK
// decoded the first value, ignored the rest and ran the call (200 with its result), and the
// progress split, decoding the whole body, missed its progress token.
func TestRedTeam28_TrailingDataRefused(t *testing.T) {
	f := newFixture()
	f.orch = &slowWatch{wait: 10 * time.Millisecond}
	tok := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(tok)})
	h := map[string]string{"Authorization": "Bearer " + tok, "Mcp-Protocol-Version": "2025-11-25"}
	for _, tail := range []string{` x`, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, `]`} {
		code, hdr, body := post(t, addr, "/mcp", h, watchCall(`"_meta":{"progressToken":"p1"},`)+tail)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":-32700`) || strings.Contains(body, `"result"`) {
			t.Errorf("tail %q: got %d %s, want 400 with a JSON-RPC parse error:\n%.400s", tail, code, hdr.Get("Content-Type"), body)
		}
	}
	if es := f.audit.all(); len(es) != 0 {
		t.Errorf("refused bodies reached the tools and wrote %d audit entries, want 0", len(es))
	}
}
