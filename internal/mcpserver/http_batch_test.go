package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/mcpserver"
)

// One POST holding a JSON-RPC array ran every call in it, so the
// per-client rate limit and in-flight cap, which count HTTP requests, let one request start 30
// sandboxes. These tests send the attack to the real HTTP server.

// batch is a JSON-RPC array of n tools/call requests of tool with args, ids 1..n.
func batch(n int, tool, args string) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, i+1, tool, args)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// listBatch is a JSON-RPC array of n tools/list requests.
func listBatch(n int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i+1)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// countingFixture is a fixture whose dispatcher counts every call reaching it.
func countingFixture() (*fixture, *atomic.Int64) {
	f := newFixture()
	var n atomic.Int64
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		n.Add(1)
		return record(id, "finished"), nil
	}
	f.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		n.Add(1)
		return record(dispatchID, "accepted"), nil
	}
	return f, &n
}

// rpcError is the JSON-RPC error response the guard answers a batch with.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wantBatchRefusal fails t unless the response is the protocol's refusal of a batch: HTTP
// 400 carrying one JSON-RPC error object, code -32600 (Invalid Request), id null.
func wantBatchRefusal(t *testing.T, code int, hdr http.Header, body string) {
	t.Helper()
	if code != http.StatusBadRequest {
		t.Fatalf("got HTTP %d (%.200s), want 400", code, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var e rpcError
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("body is not one JSON-RPC error object: %v: %s", err, body)
	}
	if e.JSONRPC != "2.0" || string(e.ID) != "null" || e.Error.Code != -32600 {
		t.Errorf("got jsonrpc=%q id=%s code=%d, want 2.0, null, -32600", e.JSONRPC, e.ID, e.Error.Code)
	}
	if !strings.Contains(e.Error.Message, "batch") || strings.Count(e.Error.Message, ". ") > 0 {
		t.Errorf("message %q: want one sentence naming the batch", e.Error.Message)
	}
}

func TestHTTP_BatchRefused(t *testing.T) {
	f, calls := countingFixture()
	token := newToken(t)
	// The dispatch-ceiling client may call agora_dispatch; its limits are the defaults.
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(newToken(t), token)})
	auth := "Bearer " + token
	dispatch30 := batch(30, "agora_dispatch", `{"subagent":"writer","wait_seconds":0}`)
	tests := []struct {
		name    string
		headers map[string]string
		body    string
	}{
		// No MCP-Protocol-Version header: the SDK takes the request as 2025-03-26, which still
		// had batches, and runs every call. This is the attack as found.
		{"500 describe calls, no version header", nil, batch(500, "agora_dispatch_describe", `{"id":"`+dispatchID+`"}`)},
		{"500 tools/list, no version header", nil, listBatch(500)},
		{"30 dispatches, no version header", nil, dispatch30},
		{"30 dispatches, declared 2025-03-26", map[string]string{"Mcp-Protocol-Version": "2025-03-26"}, dispatch30},
		{"30 dispatches, declared 2025-11-25", map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, dispatch30},
		{"leading whitespace", nil, " \t\r\n" + dispatch30},
		{"one call in an array", nil, batch(1, "agora_dispatch", `{"subagent":"writer","wait_seconds":0}`)},
		{"an initialize in an array", nil, "[" + initialize + "]"},
		{"not even JSON after the bracket", nil, "[garbage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"Authorization": auth}
			for k, v := range tt.headers {
				h[k] = v
			}
			code, hdr, body := post(t, addr, "/mcp", h, tt.body)
			wantBatchRefusal(t, code, hdr, body)
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the dispatcher port saw %d calls, want 0", n)
	}
	if es := f.audit.all(); len(es) != 0 {
		t.Errorf("refused batches reached the tools and wrote %d audit entries, want 0", len(es))
	}
	// A single call still works: the refusal is of the array, not of the body's content.
	code, _, body := post(t, addr, "/mcp", map[string]string{"Authorization": auth},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agora_dispatch","arguments":{"subagent":"writer","wait_seconds":0}}}`)
	if code != http.StatusOK || !strings.Contains(body, dispatchID) {
		t.Errorf("a single call: got %d %s, want 200 with the record", code, body)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the dispatcher port saw %d calls after one single call, want 1", n)
	}
}

// TestHTTP_BatchRefusedBeforeAuth: a batch without a valid token is a 401, like anything else
// without one; the batch check never tells an unauthenticated caller more.
func TestHTTP_BatchRefusedBeforeAuth(t *testing.T) {
	f, calls := countingFixture()
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(newToken(t), newToken(t))})
	code, _, _ := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + newToken(t)}, batch(30, "agora_dispatch", `{"subagent":"writer"}`))
	if code != http.StatusUnauthorized {
		t.Errorf("got %d, want 401", code)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the dispatcher port saw %d calls, want 0", n)
	}
}

// TestHTTP_BatchDoesNotBypassRateLimit: a refused batch costs one request of the client's
// budget, like any other request, and buys no calls. With a burst of 3 and no refill, the
// batch plus five single dispatches leave exactly two dispatches run.
func TestHTTP_BatchDoesNotBypassRateLimit(t *testing.T) {
	f, calls := countingFixture()
	token := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(newToken(t), token), Limits: mcpserver.Limits{Rate: 0.0001, Burst: 3}})
	auth := map[string]string{"Authorization": "Bearer " + token}
	code, hdr, body := post(t, addr, "/mcp", auth, batch(30, "agora_dispatch", `{"subagent":"writer","wait_seconds":0}`))
	wantBatchRefusal(t, code, hdr, body)
	codes := map[int]int{}
	for range 5 {
		code, _, _ := post(t, addr, "/mcp", auth,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"agora_dispatch","arguments":{"subagent":"writer","wait_seconds":0}}}`)
		codes[code]++
	}
	if diff := cmp.Diff(map[int]int{http.StatusOK: 2, http.StatusTooManyRequests: 3}, codes); diff != "" {
		t.Errorf("single calls after the batch, status counts (-want +got):\n%s", diff)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the dispatcher port saw %d calls, want 2", n)
	}
	// Once the budget is spent, a batch is a 429 like anything else: it never reaches the
	// SDK, and never costs more than the one request it is.
	if code, _, _ := post(t, addr, "/mcp", auth, listBatch(500)); code != http.StatusTooManyRequests {
		t.Errorf("a batch over the rate limit: got %d, want 429", code)
	}
}

// TestHTTP_BatchRealBinary sends the 30-dispatch batch to the real `agora mcp --http` over a
// real catalog and agora.db: it is refused, no dispatch record exists afterwards, nothing was
// audited as a call, and the refusal is in the server's log.
func TestHTTP_BatchRealBinary(t *testing.T) {
	home := newHome(t)
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKEN=" + token}, "--ceiling", "dispatch")
	// rogue is denied at accept: were the batch to get through, each call would still leave
	// a failed record behind, and no sandbox would start.
	code, hdr, body := post(t, srv.addr, "/mcp", map[string]string{"Authorization": "Bearer " + token},
		batch(30, "agora_dispatch", `{"subagent":"rogue","wait_seconds":0}`))
	wantBatchRefusal(t, code, hdr, body)
	var records []json.RawMessage
	if err := json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json"), &records); err != nil {
		t.Fatal(err)
	}
	if len(records) != 0 {
		t.Errorf("%d dispatch records exist after a refused batch, want 0", len(records))
	}
	if es := auditEntries(t, home); len(es) != 0 {
		t.Errorf("audit holds %d mcp entries after a refused batch, want 0: %+v", len(es), es)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.logs(), "JSON-RPC batch") {
		if time.Now().After(deadline) {
			t.Fatalf("the server log does not record the refusal:\n%s", srv.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(srv.logs(), token) {
		t.Errorf("the server log holds the token")
	}
}

// TestStdio_BatchCountsEveryCall: stdio has no HTTP layer, so its limit is per tool call in
// the guard. A client that negotiates 2025-03-26 (whose batches the SDK still reads) and sends
// 30 dispatches in one array gets at most its burst of them run.
func TestStdio_BatchCountsEveryCall(t *testing.T) {
	f, calls := countingFixture()
	s := f.server(t)
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(ctx, sr, sw, mcpserver.StdioConfig{Principal: tester, Limits: mcpserver.Limits{Rate: 0.0001, Burst: 3}})
		sw.Close()
	}()
	t.Cleanup(func() {
		cw.Close()
		cancel()
		<-done
	})
	dec := json.NewDecoder(cr)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(cw, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	var init map[string]any
	if err := dec.Decode(&init); err != nil {
		t.Fatal(err)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(batch(30, "agora_dispatch", `{"subagent":"writer","wait_seconds":0}`))
	var resps []struct {
		ID     int `json:"id"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := dec.Decode(&resps); err != nil {
		t.Fatal(err)
	}
	var ran, limited int
	for _, r := range resps {
		switch {
		case !r.Result.IsError:
			ran++
		case strings.Contains(r.Result.Content[0].Text, "too many calls"):
			limited++
		}
	}
	if len(resps) != 30 || ran != 3 || limited != 27 {
		t.Errorf("%d responses, %d ran, %d limited: want 30, 3 (the burst) and 27", len(resps), ran, limited)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the dispatcher port saw %d calls, want 3", n)
	}
}
