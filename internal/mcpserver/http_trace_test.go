package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// traceHeader adds a traceparent header to every request, as a traced MCP client does.
type traceHeader struct {
	value string
	next  http.RoundTripper
}

func (h traceHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", h.value)
	return h.next.RoundTrip(r)
}

// TestHTTP_TraceparentJoinsTheCallersTrace: a dispatch started over MCP HTTP with a
// traceparent header records the caller's trace id (tracing itself off: joining costs
// nothing); a malformed header is ignored, never refused, and its dispatch has no trace.
func TestHTTP_TraceparentJoinsTheCallersTrace(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKEN=" + token})
	for _, c := range []struct{ header, want string }{
		{"00-7bf92f3577b34da6a3ce929d0e0e4736-20f067aa0ba902b7-01", "7bf92f3577b34da6a3ce929d0e0e4736"},
		{"00-7bf92f3577b34da6a3ce929d0e0e4736-zz-01", ""},
		{"garbage, not a traceparent", ""},
	} {
		hc := &http.Client{Transport: traceHeader{value: c.header, next: bearer{token: token, next: http.DefaultTransport}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "trace-test", Version: "1"}, nil).
			Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatalf("header %q: %v", c.header, err)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch", Arguments: map[string]any{
			"subagent": "writer", "envs": []string{"demo"}, "wait_seconds": 120}})
		cs.Close()
		if err != nil || res.IsError {
			t.Fatalf("header %q: agora_dispatch: %v %+v", c.header, err, res)
		}
		var out loopOut
		decode(t, res, &out)
		var rec struct {
			State   string `json:"state"`
			TraceID string `json:"trace_id"`
		}
		if err := json.Unmarshal(agora(t, home, nil, "dispatch", "describe", out.Dispatch.ID, "-o", "json"), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.TraceID != c.want {
			t.Errorf("header %q: record trace_id %q, want %q", c.header, rec.TraceID, c.want)
		}
	}
}
