package claudert

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMCPServerNames(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{"servers", `{"mcpServers":{"lint":{"command":"lint-mcp","args":["--stdio"]},"github":{"type":"http","url":"https://api.example.com/mcp"}}}`, []string{"github", "lint"}, ""},
		{"no servers", `{"mcpServers":{}}`, []string{}, ""},
		{"missing mcpServers", `{"servers":{}}`, nil, `no "mcpServers" object`},
		{"null mcpServers", `{"mcpServers":null}`, nil, `no "mcpServers" object`},
		{"not an object", `[]`, nil, "not a JSON object"},
		{"duplicate server", `{"mcpServers":{"a":{},"a":{}}}`, nil, "duplicate key"},
		{"names differing in case only", `{"mcpServers":{"Lint":{},"lint":{}}}`, nil, "duplicate key"},
		{"ambiguous top-level key", `{"mcpServers":{},"MCPSERVERS":{"x":{}}}`, nil, "duplicate key"},
		{"bad name", `{"mcpServers":{"a b":{}}}`, nil, `server "a b"`},
		{"separator in name", `{"mcpServers":{"a__b":{}}}`, nil, `server "a__b"`},
		{"trailing data", `{"mcpServers":{}} {}`, nil, "data after"},
		{"invalid UTF-8", "{\"mcpServers\":{\"\xff\":{}}}", nil, "UTF-8"},
		{"too large", `{"mcpServers":{},"pad":"` + strings.Repeat("x", maxMCPConfigBytes) + `"}`, nil, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MCPServerNames(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("MCPServerNames: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(len(got), len(AllowedTools(Grants{MCPServers: got}))); diff != "" {
				t.Errorf("every name must become a rule (-want +got):\n%s", diff)
			}
		})
	}
}
