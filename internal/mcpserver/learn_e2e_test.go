package mcpserver_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLearn_MCPCannotLearn: learn is a person's decision. Over stdio and over HTTP, with
// the official SDK client at the dispatch ceiling, agora_dispatch with a learn argument is
// refused (no such input), and a dispatch to a target a person put in mode: learn is refused
// saying why; rogue (a command no grant allows, which a learn dispatch would run) never
// starts, and no dispatch is recorded by either. Failed before: mode: learn did not exist,
// and the MCP door could not be told apart.
func TestLearn_MCPCannotLearn(t *testing.T) {
	home := newHome(t)
	if err := os.WriteFile(filepath.Join(home, "agora.yaml"), []byte("targets:\n  learning:\n    mode: learn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKENS_FILE=" + tokensFile(t, map[string][2]string{"lead": {token, "dispatch"}})})
	stdio := stdioSession(t, home, "--ceiling", "dispatch")
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	httpCS, err := newClient().Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { httpCS.Close() })
	for name, cs := range map[string]*mcp.ClientSession{"stdio": stdio, "http": httpCS} {
		for _, tc := range []struct {
			args map[string]any
			want []string
		}{
			{map[string]any{"subagent": "writer", "learn": true}, []string{"learn"}},
			{map[string]any{"subagent": "rogue", "target": "learning"}, []string{"learn mode", "person", "MCP client cannot start a learn dispatch"}},
		} {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch", Arguments: tc.args})
			msg := ""
			switch {
			case err != nil:
				msg = err.Error()
			case res.IsError:
				msg = text(res)
			default:
				t.Errorf("%s: agora_dispatch %v was accepted: %s", name, tc.args, text(res))
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: agora_dispatch %v refused with %q, want it to say %q", name, tc.args, msg, w)
				}
			}
		}
	}
	if out := string(agora(t, home, nil, "dispatch", "list", "-o", "json")); strings.TrimSpace(out) != "[]" {
		t.Errorf("a refused learn dispatch was recorded:\n%s", out)
	}
}
