package claudert

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
)

func TestArgs(t *testing.T) {
	base := []string{
		"--print", "--verbose", "--output-format=stream-json", "--input-format=text",
		"--permission-mode=dontAsk", "--setting-sources=", "--strict-mcp-config",
	}
	tests := []struct {
		name       string
		cfg        Config
		systemFile string
		want       []string
	}{
		{
			name: "nothing granted loads no built-in tool but TodoWrite and allows nothing",
			cfg:  Config{SystemPrompt: "ignored here: Args only names the file"},
			want: slices.Concat(base, []string{"--tools=TodoWrite", "--disallowedTools"}, allDenied),
		},
		{
			name: "everything",
			cfg: Config{
				Model:     "claude-sonnet-4-5",
				MaxTurns:  12,
				MCPConfig: "/agora/bundle/cap/mcp.json",
				Grants: Grants{
					Set: grant.Set{
						Tools:    []string{"read_file", "run_command", "http_fetch"},
						Commands: []string{"git diff **", "git status", "git diff *"},
						Egress:   grant.MustEgressRules("api.github.com"),
					},
					MCPServers: []string{"linter"},
				},
			},
			systemFile: "/tmp/claudert-1/system-prompt",
			want: slices.Concat(base, []string{
				"--mcp-config=/agora/bundle/cap/mcp.json",
				"--model=claude-sonnet-4-5",
				"--max-turns=12",
				"--append-system-prompt-file=/tmp/claudert-1/system-prompt",
				"--tools=Bash,Read,TodoWrite,WebFetch",
				"--allowedTools", "Bash(git diff *)", "Bash(git status)", "Read(./**)", "WebFetch(domain:api.github.com)", "mcp__linter",
				"--disallowedTools",
			}, without(allDenied, "Bash", "WebFetch", "Glob", "Grep", "LS", "LSP", "NotebookRead", "Read")),
		},
		{
			name: "a model that looks like a flag stays a value",
			cfg:  Config{Model: "--dangerously-skip-permissions"},
			want: slices.Concat(base, []string{"--model=--dangerously-skip-permissions", "--tools=TodoWrite", "--disallowedTools"}, allDenied),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Args(tt.cfg, tt.systemFile, "")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Args (-want +got):\n%s", diff)
			}
			for _, a := range got {
				if tt.cfg.SystemPrompt != "" && strings.Contains(a, tt.cfg.SystemPrompt) {
					t.Errorf("the system prompt is in argv: %q", a)
				}
				if strings.Contains(a, "bypassPermissions") || strings.Contains(a, "dangerously-skip-permissions") && !strings.HasPrefix(a, "--model=") {
					t.Errorf("argv holds a permission bypass: %q", a)
				}
			}
		})
	}
}
