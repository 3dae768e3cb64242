package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProgressSplit_Route: a call that carries a progress token, however its key is spelled
// in JSON, is answered as an event stream; every other call as one JSON response, without
// the split decoding its body (the pre-check).
func TestProgressSplit_Route(t *testing.T) {
	tests := []struct {
		name, body string
		stream     bool
	}{
		{"no token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`, false},
		{"meta without token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"}}`, false},
		{"token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p1"},"name":"x"}}`, true},
		{"numeric token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"x"}}`, true},
		{"escaped key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progress\u0054oken":"p1"},"name":"x"}}`, true},
		{"token word in an argument only", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"q":"progressToken"}}}`, false},
		{"null token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":null},"name":"x"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			split := progressSplit{
				plain:  http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got = "plain" }),
				stream: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got = "stream" }),
			}
			split.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body)))
			want := "plain"
			if tt.stream {
				want = "stream"
			}
			if got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

// TestMayCarryProgressToken: the pre-check never says no to a body whose decode could find a
// progress token.
func TestMayCarryProgressToken(t *testing.T) {
	for body, want := range map[string]bool{
		`{"params":{"_meta":{"progressToken":1}}}`:      true,
		`{"params":{"_meta":{"progress\u0054oken":1}}}`: true,
		`{"params":{"_meta":{"\u0070rogressToken":1}}}`: true,
		`{"params":{"name":"agora_dispatch_describe"}}`: false,
		``: false,
	} {
		if got := mayCarryProgressToken([]byte(body)); got != want {
			t.Errorf("mayCarryProgressToken(%s) = %v, want %v", body, got, want)
		}
	}
}
