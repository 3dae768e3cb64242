package claudert

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/agora-dev/agora/internal/grant"
)

// allDenied is DisallowedTools when nothing is granted.
var allDenied = []string{
	"Agent", "Artifact", "AskUserQuestion", "Bash", "BashOutput", "CronCreate", "CronDelete",
	"Edit", "EnterWorktree", "ExitWorktree", "Glob", "Grep", "KillShell", "LS", "LSP",
	"ListMcpResourcesTool", "MultiEdit", "NotebookEdit", "NotebookRead", "PowerShell", "Read",
	"ReadMcpResourceTool", "Skill", "SlashCommand", "Task", "TaskOutput", "TaskStop",
	"WebFetch", "WebSearch", "Write",
}

func without(list []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return slices.Contains(drop, s) })
}

func TestTranslate(t *testing.T) {
	readFam := []string{"Glob", "Grep", "LS", "LSP", "NotebookRead", "Read"}
	tests := []struct {
		name         string
		g            Grants
		tools        []string
		allowed      []string
		disallowed   []string
		droppedParts []string // each must appear in one Dropped line
	}{
		{
			name:       "nothing granted",
			g:          Grants{},
			tools:      []string{"TodoWrite"},
			disallowed: allDenied,
		},
		{
			name:       "commands and hosts without their tools grant nothing",
			g:          Grants{Set: grant.Set{Commands: []string{"git diff **"}, Egress: grant.MustEgressRules("api.example.com")}},
			tools:      []string{"TodoWrite"},
			disallowed: allDenied,
		},
		{
			name:       "read_file",
			g:          Grants{Set: grant.Set{Tools: []string{"read_file"}}},
			tools:      []string{"Read", "TodoWrite"},
			allowed:    []string{"Read(./**)"},
			disallowed: without(allDenied, readFam...),
		},
		{
			name:       "list_files keeps Read absent through --tools, not a deny",
			g:          Grants{Set: grant.Set{Tools: []string{"list_files"}}},
			tools:      []string{"Glob", "TodoWrite"},
			disallowed: without(allDenied, readFam...),
		},
		{
			name:       "search_files",
			g:          Grants{Set: grant.Set{Tools: []string{"search_files"}}},
			tools:      []string{"Glob", "Grep", "TodoWrite"},
			disallowed: without(allDenied, readFam...),
		},
		{
			name:       "write_file",
			g:          Grants{Set: grant.Set{Tools: []string{"write_file"}}},
			tools:      []string{"Edit", "TodoWrite", "Write"},
			allowed:    []string{"Edit(./**)"},
			disallowed: without(allDenied, "Edit", "Write"),
		},
		{
			name: "run_command maps what it can express exactly",
			g: Grants{Set: grant.Set{Tools: []string{"run_command"}, Commands: []string{
				"git status", "git diff **", "go test ./... **", "sh -c **", "git log --format=%H **",
				"git  show   HEAD",
				"git diff *", "ls *.go", "cat [ab]", "echo $HOME", "FOO=1 make", "npm run test:unit",
				"a,b", "echo (x)", "cat ~/.netrc", "**",
			}}},
			tools:      []string{"Bash", "TodoWrite"},
			allowed:    []string{"Bash", "Bash(git diff *)", "Bash(git log --format=%H *)", "Bash(git show HEAD)", "Bash(git status)", "Bash(go test ./... *)"},
			disallowed: without(allDenied, "Bash"),
			droppedParts: []string{
				`command "git diff *": word "*" is a wildcard`, `command "ls *.go"`, `command "cat [ab]"`,
				`command "echo $HOME"`, `command "FOO=1 make": program "FOO=1" would read as a variable assignment`,
				`command "npm run test:unit"`, `command "a,b"`, `command "echo (x)"`, `command "cat ~/.netrc"`,
				`command "**": names no program`,
			},
		},
		{
			// The hook judges every line; a grant that names the shell lets any line run.
			name:       "run_command naming a shell allows every Bash line",
			g:          Grants{Set: grant.Set{Tools: []string{"run_command"}, Commands: []string{"bash -lc *", "git status"}}},
			tools:      []string{"Bash", "TodoWrite"},
			allowed:    []string{"Bash", "Bash(git status)"},
			disallowed: without(allDenied, "Bash"),
		},
		{
			name:         "run_command with nothing expressible loads no Bash",
			g:            Grants{Set: grant.Set{Tools: []string{"run_command"}, Commands: []string{"git diff *"}}},
			tools:        []string{"TodoWrite"},
			disallowed:   allDenied,
			droppedParts: []string{`command "git diff *"`},
		},
		{
			name:         "http_fetch maps exact hosts",
			g:            Grants{Set: grant.Set{Tools: []string{"http_fetch"}, Egress: []grant.EgressRule{{Host: "api.example.com"}, {Host: "*.example.org"}, {Host: "docs.rs"}, {Host: "Bad.Host"}}}},
			tools:        []string{"TodoWrite", "WebFetch"},
			allowed:      []string{"WebFetch(domain:api.example.com)", "WebFetch(domain:docs.rs)"},
			disallowed:   without(allDenied, "WebFetch"),
			droppedParts: []string{`egress "*.example.org": Claude Code's *.domain rule also matches the domain itself`, `egress "Bad.Host"`},
		},
		{
			name:         "ask_human is nothing",
			g:            Grants{Set: grant.Set{Tools: []string{"ask_human"}}},
			tools:        []string{"TodoWrite"},
			disallowed:   allDenied,
			droppedParts: []string{`tool "ask_human": claude --print cannot ask a person`},
		},
		{
			name:         "mcp servers",
			g:            Grants{MCPServers: []string{"github", "lint-1", "a__b", "bad name", ""}},
			tools:        []string{"TodoWrite"},
			allowed:      []string{"mcp__github", "mcp__lint-1"},
			disallowed:   allDenied,
			droppedParts: []string{`mcp server "a__b"`, `mcp server "bad name"`, `mcp server ""`},
		},
		{
			name:         "unknown tool",
			g:            Grants{Set: grant.Set{Tools: []string{"shell"}}},
			tools:        []string{"TodoWrite"},
			disallowed:   allDenied,
			droppedParts: []string{`tool "shell": not an agora tool`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.tools, Tools(tt.g)); diff != "" {
				t.Errorf("Tools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.allowed, AllowedTools(tt.g), cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
				t.Errorf("AllowedTools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.disallowed, DisallowedTools(tt.g)); diff != "" {
				t.Errorf("DisallowedTools (-want +got):\n%s", diff)
			}
			dropped := Dropped(tt.g)
			if len(dropped) != len(tt.droppedParts) {
				t.Errorf("got %d dropped %q, want %d", len(dropped), dropped, len(tt.droppedParts))
			}
			for _, part := range tt.droppedParts {
				if !slices.ContainsFunc(dropped, func(d string) bool { return strings.Contains(d, part) }) {
					t.Errorf("no dropped line contains %q; got %q", part, dropped)
				}
			}
		})
	}
}

// TestTranslate_NeverGrantsTheRiskyTools pins that a full grant still denies the tools no
// agora grant maps to.
func TestTranslate_NeverGrantsTheRiskyTools(t *testing.T) {
	g := Grants{Set: grant.Set{
		Tools:    []string{"read_file", "write_file", "list_files", "search_files", "run_command", "http_fetch", "ask_human"},
		Commands: []string{"make **"},
		Egress:   grant.MustEgressRules("example.com"),
	}}
	denied := DisallowedTools(g)
	for _, tool := range []string{"WebSearch", "Agent", "Task", "AskUserQuestion", "Skill", "Artifact", "EnterWorktree", "CronCreate", "NotebookEdit", "MultiEdit", "PowerShell"} {
		if !slices.Contains(denied, tool) {
			t.Errorf("%s is not denied; denied: %q", tool, denied)
		}
	}
	for _, tool := range Tools(g) {
		if slices.Contains(denied, tool) {
			t.Errorf("%s is both loaded and denied", tool)
		}
	}
}

// claudeMatches models Claude Code's Bash rule matching for the rules bashRule emits:
// "Bash(P)" matches the command P exactly, "Bash(P *)" matches P alone or P, a space and
// anything (https://code.claude.com/docs/en/permissions).
func claudeMatches(rule, command string) bool {
	body := strings.TrimSuffix(strings.TrimPrefix(rule, "Bash("), ")")
	if prefix, ok := strings.CutSuffix(body, " *"); ok {
		return command == prefix || strings.HasPrefix(command, prefix+" ")
	}
	return command == body
}

// TestBashRule_NeverWidens checks, over random patterns and argv, that whatever the emitted
// rule lets Claude Code run, the agora pattern allows too.
func TestBashRule_NeverWidens(t *testing.T) {
	words := []string{"git", "diff", "log", "-x", "--stat", "a.go", "b", "*", "**", "*.go", "[ab]", "a:b", "$X", "F=1", "%H"}
	argWords := []string{"git", "diff", "log", "-x", "--stat", "a.go", "b", "c", "F=1", "%H", "x.go"}
	rapid.Check(t, func(t *rapid.T) {
		pattern := strings.Join(rapid.SliceOfN(rapid.SampledFrom(words), 1, 5).Draw(t, "pattern"), " ")
		p, err := grant.ParseCommandPattern(pattern)
		rule, why := bashRule(pattern)
		if why != "" {
			return
		}
		if err != nil {
			t.Fatalf("bashRule translated %q, which agora refuses: %v", pattern, err)
		}
		argv := rapid.SliceOfN(rapid.SampledFrom(argWords), 1, 6).Draw(t, "argv")
		if claudeMatches(rule, strings.Join(argv, " ")) && !p.Match(argv) {
			t.Fatalf("rule %s lets Claude Code run %q, which pattern %q does not allow", rule, argv, pattern)
		}
		if p.Match(argv) && !claudeMatches(rule, strings.Join(argv, " ")) {
			t.Fatalf("rule %s refuses %q, which pattern %q allows: a translated pattern must be exact", rule, argv, pattern)
		}
	})
}
