package claudert

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
)

func TestMapTool(t *testing.T) {
	tests := []struct {
		entry   string
		want    grant.Set
		claude  []string
		note    string // a substring of the note; "" when there is none
		refused string // a substring of the refusal; "" when it maps
	}{
		{entry: "Read", want: grant.Set{Tools: []string{"read_file"}}, claude: []string{"Read", "Read(./**)"}},
		{entry: "Read(./**)", want: grant.Set{Tools: []string{"read_file"}}, claude: []string{"Read", "Read(./**)"}},
		{entry: "Edit", want: grant.Set{Tools: []string{"write_file"}}, claude: []string{"Edit", "Write", "Edit(./**)"}},
		{entry: "Write", want: grant.Set{Tools: []string{"write_file"}}, claude: []string{"Edit", "Write", "Edit(./**)"}},
		{entry: "Edit(./**)", want: grant.Set{Tools: []string{"write_file"}}, claude: []string{"Edit", "Write", "Edit(./**)"}},
		{entry: "Glob", want: grant.Set{Tools: []string{"list_files"}}, claude: []string{"Glob"}},
		{entry: "Grep", want: grant.Set{Tools: []string{"search_files"}}, claude: []string{"Glob", "Grep"}},
		{entry: "Bash", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"bash -c *"}}, claude: []string{"Bash"}},
		{entry: "Bash(git status)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"git status"}}, claude: []string{"Bash", "Bash(git status)"}},
		// Launchers: git (aliases, hooks, diff.external), go (go test runs the tests the
		// agent writes), npm (package.json's scripts), make, npx, docker: any arguments run anything.
		{entry: "Bash(git diff:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"git diff **"}}, claude: []string{"Bash", "Bash(git diff *)"},
			note: "git runs the programs or code its arguments, files or configuration name (a launcher): with any arguments it can run anything"},
		{entry: "Bash(go test *)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"go test **"}}, claude: []string{"Bash", "Bash(go test *)"},
			note: "go runs the programs"},
		{entry: "Bash(npm run test:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"npm run test **"}}, claude: []string{"Bash", "Bash(npm run test *)"},
			note: "npm runs the programs"},
		{entry: "Bash(git:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"git **"}}, claude: []string{"Bash", "Bash(git *)"},
			note: "can run anything"},
		{entry: "Bash(make:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"make **"}}, claude: []string{"Bash", "Bash(make *)"},
			note: "can run anything"},
		{entry: "Bash(npx:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"npx **"}}, claude: []string{"Bash", "Bash(npx *)"},
			note: "can run anything"},
		{entry: "Bash(docker run:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"docker run **"}}, claude: []string{"Bash", "Bash(docker run *)"},
			note: "can run anything"},
		{entry: "Bash(ls:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"ls **"}}, claude: []string{"Bash", "Bash(ls *)"}},
		{entry: "WebFetch(domain:docs.example.com)", want: grant.Set{Tools: []string{"http_fetch"}, Egress: []grant.EgressRule{{Host: "docs.example.com"}}},
			claude: []string{"WebFetch", "WebFetch(domain:docs.example.com)"}},
		{entry: "Bash(env:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"env **"}}, claude: []string{"Bash", "Bash(env *)"},
			note: "env runs the programs or code its arguments, files or configuration name"},
		{entry: "Bash(python3 -m:*)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"python3 -m **"}}, claude: []string{"Bash", "Bash(python3 -m *)"},
			note: "python3 runs the programs or code"},
		{entry: "Bash(env)", want: grant.Set{Tools: []string{"run_command"}, Commands: []string{"env"}}, claude: []string{"Bash", "Bash(env)"}},
		{entry: "TodoWrite", claude: []string{}},
		{entry: "LS", claude: []string{}},

		{entry: "WebFetch", refused: "reaches any host"},
		{entry: "WebFetch(domain:*.example.com)", refused: "also matches the domain itself"},
		{entry: "WebFetch(domain:Example.COM)", refused: "lowercase"},
		{entry: "WebFetch(https://example.com)", refused: "want WebFetch(domain:HOST)"},
		{entry: "WebSearch", refused: "never host-restricted"},
		{entry: "Agent", refused: "second agent loop"},
		{entry: "Task", refused: "second agent loop"},
		{entry: "AskUserQuestion", refused: "cannot ask a person"},
		{entry: "NotebookEdit", refused: `no agora grant gives claude "NotebookEdit"`},
		{entry: "mcp__github__create_issue", refused: "an MCP tool"},
		{entry: "mcp__github", refused: "an MCP tool"},
		{entry: "Read(src/**)", refused: "an agora grant has no paths"},
		{entry: "Edit(**/*.go)", refused: "an agora grant has no paths"},
		{entry: "Glob(*.go)", refused: "agora cannot express Glob(...)"},
		{entry: "Bash(*)", refused: "names no program"},
		{entry: "Bash(:*)", refused: "names no program"},
		{entry: "Bash(git * main)", refused: "wildcard"},
		{entry: "Bash(git*)", refused: "wildcard"},
		{entry: "Bash(rm -rf $HOME)", refused: "a shell or Claude Code's rule syntax would interpret"},
		{entry: "Bash(git log --format=%H,%s)", refused: "would interpret"},
		{entry: "Bash(echo 'a b')", refused: "would interpret"},
		{entry: "Bash(FOO=1 make)", refused: "variable assignment"},
		{entry: "Bash(bash:*)", refused: "names a shell"},
		{entry: "Bash(sh -c:*)", refused: "names a shell"},
		{entry: "Bash(git  status)", refused: "single spaces"},
		{entry: "Bash(git status", refused: "closing parenthesis"},
		{entry: "Bash()", refused: "empty parentheses"},
		{entry: "(git status)", refused: "names no tool"},
		{entry: "Bäsh", refused: "letters, digits"},
		{entry: "Skill", refused: `no agora grant gives claude "Skill"`},
		{entry: strings.Repeat("A", 2000), refused: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			m := MapTool(tt.entry)
			if tt.refused != "" {
				if !strings.Contains(m.Refused, tt.refused) {
					t.Errorf("refused = %q, want it to say %q", m.Refused, tt.refused)
				}
				if len(m.Grant.Tools)+len(m.Grant.Commands)+len(m.Grant.Egress) > 0 {
					t.Errorf("a refused entry grants %+v", m.Grant)
				}
				return
			}
			if m.Refused != "" {
				t.Fatalf("refused: %s", m.Refused)
			}
			if diff := cmp.Diff(tt.want, m.Grant); diff != "" {
				t.Errorf("grant (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.claude, m.Claude); diff != "" {
				t.Errorf("claude gets (-want +got):\n%s", diff)
			}
			if strings.HasPrefix(tt.entry, "Bash(") && (tt.note == "") != (m.Note == "") || !strings.Contains(m.Note, tt.note) {
				t.Errorf("note = %q, want it to say %q", m.Note, tt.note)
			}
		})
	}
}

// TestMapTool_InvertsAllowedTools: every Bash and WebFetch rule AllowedTools writes for a
// grant maps back to the very pattern or host it came from, and the read and write rules to
// their tools. The two directions are one mapping.
func TestMapTool_InvertsAllowedTools(t *testing.T) {
	g := Grants{Set: grant.Set{
		Tools:    []string{"read_file", "write_file", "run_command", "http_fetch"},
		Commands: []string{"git status", "git diff **", "go test **", "make", "npm run lint **"},
		Egress:   []grant.EgressRule{{Host: "api.github.com"}, {Host: "example.com"}},
	}}
	var commands, hosts, tools []string
	for _, rule := range AllowedTools(g) {
		m := MapTool(rule)
		if m.Refused != "" {
			t.Errorf("rule %q that AllowedTools wrote is refused: %s", rule, m.Refused)
			continue
		}
		commands = append(commands, m.Grant.Commands...)
		for _, e := range m.Grant.Egress {
			hosts = append(hosts, e.Host)
		}
		tools = append(tools, m.Grant.Tools...)
	}
	slices.Sort(commands)
	slices.Sort(hosts)
	slices.Sort(tools)
	if diff := cmp.Diff([]string{"git diff **", "git status", "go test **", "make", "npm run lint **"}, commands); diff != "" {
		t.Errorf("commands mapped back (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"api.github.com", "example.com"}, hosts); diff != "" {
		t.Errorf("hosts mapped back (-want +got):\n%s", diff)
	}
	for _, want := range []string{"read_file", "write_file", "run_command", "http_fetch"} {
		if !slices.Contains(tools, want) {
			t.Errorf("no rule mapped back to %s: %v", want, tools)
		}
	}
	// The any-line shell pattern translates to a bare Bash, which maps back to it.
	any := Grants{Set: grant.Set{Tools: []string{"run_command"}, Commands: []string{anyLinePattern}}}
	if got := AllowedTools(any); !slices.Equal(got, []string{"Bash"}) {
		t.Fatalf("AllowedTools(%q) = %v, want [Bash]", anyLinePattern, got)
	}
	if m := MapTool("Bash"); !slices.Equal(m.Grant.Commands, []string{anyLinePattern}) {
		t.Errorf("Bash maps to %v, want [%s]", m.Grant.Commands, anyLinePattern)
	}
}

// FuzzMapTool: any entry maps or is refused, never panics; what maps is a valid grant whose
// forward translation drops nothing and holds no tool the entry did not lead to.
func FuzzMapTool(f *testing.F) {
	for _, s := range []string{"Read", "Bash", "Bash(git diff:*)", "Bash(go test *)", "WebFetch(domain:a.example)",
		"Bash(a b c)", "Read(./**)", "mcp__s__t", "Bash(()", "Bash(x))", "WebFetch(domain:)", "Bash( git)", "Bash(git :*)",
		"Bash(bash -lc:*)", "Edit(./**)", "Bash(sh)", "WebFetch(domain:127.0.0.1)", "WebFetch(domain:a..b)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		m := MapTool(entry)
		if m.Refused != "" {
			if len(m.Grant.Tools)+len(m.Grant.Commands)+len(m.Grant.Egress) > 0 || len(m.Claude) > 0 {
				t.Fatalf("refused %q (%s) yet grants %+v, claude %v", entry, m.Refused, m.Grant, m.Claude)
			}
			return
		}
		for _, tool := range m.Grant.Tools {
			if !grant.IsBuiltinTool(tool) {
				t.Fatalf("%q maps to unknown tool %q", entry, tool)
			}
		}
		for _, c := range m.Grant.Commands {
			if _, err := grant.ParseCommandPattern(c); err != nil {
				t.Fatalf("%q maps to a bad pattern %q: %v", entry, c, err)
			}
		}
		for _, e := range m.Grant.Egress {
			if err := e.Validate(); err != nil {
				t.Fatalf("%q maps to a bad egress rule %v: %v", entry, e, err)
			}
		}
		if d := Dropped(Grants{Set: m.Grant}); len(d) > 0 {
			t.Fatalf("%q maps to a grant the forward translation drops: %v", entry, d)
		}
		if len(m.Grant.Tools) > 1 || len(m.Grant.Commands) > 1 || len(m.Grant.Egress) > 1 {
			t.Fatalf("%q maps to more than one grant item: %+v", entry, m.Grant)
		}
	})
}
