package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRedTeam47M_HeaderMentionKeepsAgoraTheJudge: a schema that mentions
// x-mcp-header keeps its whole schema on the SDK server, whether the mention is a real
// annotation or only words in a description. Either way, over HTTP with the SDK's newest
// protocol (the one that checks Mcp-Param headers), the SDK still checks no argument against
// the schema: a call without a header the description merely names succeeds, and arguments
// the schema refuses are refused by agora's guard, audited as invalid, never run, with or
// without the annotation.
func TestRedTeam47M_HeaderMentionKeepsAgoraTheJudge(t *testing.T) {
	const id = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	for _, annotated := range []bool{false, true} {
		props := idProps()
		if annotated {
			props["id"].Extra = map[string]any{"x-mcp-header": "Dispatch"}
		} else {
			props["id"].Description += "; send no x-mcp-header for it"
		}
		var ran int
		tl := define(tool{name: "x_probe", tier: CeilingRead}, props, func(_ *Server, _ context.Context, _ Principal, a idArgs) (any, error) {
			ran++
			return map[string]string{"id": a.ID}, nil
		})
		if !bytes.Contains(tl.schema, []byte("x-mcp-header")) {
			t.Fatalf("schema %s does not mention x-mcp-header", tl.schema)
		}
		served, _ := tl.served().InputSchema.(json.RawMessage)
		if !bytes.Equal(served, tl.schema) {
			t.Fatalf("served with %s, want the whole schema", served)
		}
		var decisions []string
		s, err := New(Config{Catalog: nilCatalog{}, Dispatcher: nilDispatcher{}, Audit: func(_ context.Context, e AuditEntry) error {
			decisions = append(decisions, e.Details["decision"].(string))
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		m := mcp.NewServer(&mcp.Implementation{Name: "probe", Version: "v0"}, nil)
		m.AddTool(tl.served(), s.guard(tl, func(mcp.Request) (Principal, bool) {
			return Principal{Client: "c", Ceiling: CeilingRead}, true
		}, nil))
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, &mcp.StreamableHTTPOptions{Stateless: true}))
		t.Cleanup(hs.Close)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v0"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if _, err := cs.ListTools(t.Context(), nil); err != nil { // the client learns the headers to send
			t.Fatal(err)
		}
		for _, c := range []struct {
			args string
			ok   bool
		}{
			{`{"id":"` + id + `"}`, true},
			{`{"id":"` + strings.ToLower(id) + `"}`, false},
			{`{"id":"` + id + `","extra":1}`, false},
			{`{"id":7}`, false},
			{`{}`, false},
		} {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "x_probe", Arguments: json.RawMessage(c.args)})
			if err != nil {
				// The SDK refusing at the header check is a refusal too, but not agora's:
				// it must be only for a header, never for the schema.
				t.Errorf("annotated=%v %s: %v", annotated, c.args, err)
				continue
			}
			if res.IsError == c.ok {
				t.Errorf("annotated=%v %s: IsError %v", annotated, c.args, res.IsError)
			}
		}
		if want := []string{"allowed", "invalid", "invalid", "invalid", "invalid"}; strings.Join(decisions, ",") != strings.Join(want, ",") {
			t.Errorf("annotated=%v: audited %v, want %v", annotated, decisions, want)
		}
		if ran != 1 {
			t.Errorf("annotated=%v: ran %d times, want 1", annotated, ran)
		}
	}
}
