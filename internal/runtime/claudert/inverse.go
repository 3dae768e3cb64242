package claudert

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/cmdread"
	"github.com/agora-dev/agora/internal/grant"
)

// ToolMapping is how one entry of a Claude Code subagent's tools ("Read", "Bash(git diff:*)",
// "WebFetch(domain:example.com)") maps to agora's grant: the inverse of [Tools] and
// [AllowedTools]. An entry maps only when the grant it yields translates back to the entry
// itself ([MapTool] checks this with the forward translation, so the two cannot drift);
// otherwise Refused says why and Grant is empty.
type ToolMapping struct {
	// Entry is the entry as written.
	Entry string `json:"entry"`
	// Grant is what the entry adds to the subagent's grant: tools, command patterns and
	// egress hosts. Empty when it adds nothing or is refused.
	Grant grant.Set `json:"grant"`
	// Claude is what claude gets from Grant: the tools it loads (TodoWrite, always loaded,
	// left out), then the permission rules.
	Claude []string `json:"claude"`
	// Note says how the mapping differs from the entry's letter without widening what it
	// grants the agent beyond the sandbox (write_file gives Edit and Write together, say).
	Note string `json:"note,omitempty"`
	// Refused says why the entry cannot be mapped exactly; "" when it maps.
	Refused string `json:"refused,omitempty"`
}

// anyLinePattern is the command pattern a bare Bash maps to: it names the shell, so any line
// runs ([grant.CommandPattern.RunsAnyLine]), and [AllowedTools] translates it back to Bash.
const anyLinePattern = "bash -c *"

// retiredTools are names older Claude Code releases had. The release agora runs has no such
// tool, so claude ignores the name in a subagent's tools; the import grants nothing for it.
var retiredTools = map[string]string{
	"LS":           "Glob",
	"MultiEdit":    "Edit",
	"NotebookRead": "Read",
	"BashOutput":   "Bash",
	"KillShell":    "Bash",
	"KillBash":     "Bash",
}

// MapTool maps one entry of a Claude Code subagent's tools to the grant that gives claude
// exactly that tool or rule under agora:
//
//   - Read: read_file. Edit, Write: write_file (claude then has both). Glob: list_files.
//     Grep: search_files (Grep and Glob). Read(./**) and Edit(./**) are the rules those
//     grants produce, so they map too; any other path is refused (a grant has no paths).
//   - Bash: run_command with the pattern "bash -c *", any line. Bash(git status) maps to the
//     exact command "git status"; Bash(git diff:*) and Bash(git diff *) to "git diff **". A
//     wildcard elsewhere, a word a shell would interpret, or a prefix that names a shell is
//     refused: Claude Code's * matches any number of words, agora's one argument.
//   - WebFetch(domain:HOST): http_fetch with egress HOST; a bare WebFetch (any host) or a
//     wildcard domain is refused.
//   - TodoWrite is always loaded and adds nothing; the names of retired tools add nothing.
//   - Everything else is refused, naming why: WebSearch, Agent/Task, AskUserQuestion,
//     NotebookEdit, MCP tools (mcp__server__tool) and names agora does not know.
func MapTool(entry string) ToolMapping {
	m := ToolMapping{Entry: entry, Claude: []string{}}
	name, content, args, why := splitToolEntry(entry)
	if why != "" {
		m.Refused = why
		return m
	}
	var want string // the tool or rule the grant must translate back to
	if args {
		m.Grant, want, m.Note, m.Refused = mapRule(name, content)
	} else {
		m.Grant, want, m.Note, m.Refused = mapBare(name)
	}
	if m.Refused != "" {
		m.Grant = grant.Set{}
		return m
	}
	return agree(m, want)
}

// agree fills in what claude gets from m.Grant and refuses the mapping unless that holds
// want (a tool or a rule), translated without a drop.
func agree(m ToolMapping, want string) ToolMapping {
	if len(m.Grant.Tools) == 0 {
		return m // adds nothing: TodoWrite, a retired name
	}
	tr := translate(Grants{Set: m.Grant})
	for _, t := range tr.tools {
		if t != ccTodoWrite {
			m.Claude = append(m.Claude, t)
		}
	}
	for _, r := range tr.allowed {
		if !slices.Contains(m.Claude, r) { // a bare Bash is both a tool and its rule
			m.Claude = append(m.Claude, r)
		}
	}
	switch {
	case len(tr.dropped) > 0:
		return ToolMapping{Entry: m.Entry, Claude: []string{}, Refused: strings.Join(tr.dropped, "; ")}
	case !slices.Contains(tr.tools, want) && !slices.Contains(tr.allowed, want):
		return ToolMapping{Entry: m.Entry, Claude: []string{},
			Refused: fmt.Sprintf("agora's grant for it translates back to %s, not %s", strings.Join(m.Claude, ", "), want)}
	}
	return m
}

// mapBare maps a tool named without arguments.
func mapBare(name string) (g grant.Set, want, note, refused string) {
	switch name {
	case ccRead:
		return tools("read_file"), ccRead, "", ""
	case ccEdit, ccWrite:
		return tools("write_file"), name, "write_file gives claude Edit and Write together, under the workspace", ""
	case ccGlob:
		return tools("list_files"), ccGlob, "", ""
	case ccGrep:
		return tools("search_files"), ccGrep, "search_files gives claude Grep and Glob", ""
	case ccBash:
		g := tools("run_command")
		g.Commands = []string{anyLinePattern}
		return g, ccBash, "any command line, inside the sandbox", ""
	case ccTodoWrite:
		return grant.Set{}, "", "always loaded: it touches nothing", ""
	case ccWebFetch:
		return grant.Set{}, "", "", "WebFetch without a domain reaches any host; name each host: WebFetch(domain:HOST)"
	case "WebSearch":
		return grant.Set{}, "", "", "server-side web search is never host-restricted; agora denies it"
	case "Agent", "Task":
		return grant.Set{}, "", "", "a subagent would start a second agent loop under the same rules; agora denies it"
	case "AskUserQuestion":
		return grant.Set{}, "", "", "claude --print cannot ask a person"
	}
	if succ, ok := retiredTools[name]; ok {
		return grant.Set{}, "", fmt.Sprintf("not a tool of the Claude Code agora runs (%s replaced it); claude ignores the name, so nothing is granted", succ), ""
	}
	if strings.HasPrefix(name, "mcp__") {
		return grant.Set{}, "", "", "an MCP tool; agora loads MCP servers only from a capability's mcp.json"
	}
	return grant.Set{}, "", "", fmt.Sprintf("no agora grant gives claude %q; agora maps Read, Edit, Write, Glob, Grep, Bash, Bash(COMMAND), WebFetch(domain:HOST) and TodoWrite", name)
}

// mapRule maps a tool named with arguments: NAME(content).
func mapRule(name, content string) (g grant.Set, want, note, refused string) {
	switch name {
	case ccBash:
		return bashEntry(content)
	case ccRead, ccEdit:
		if content != "./**" {
			return g, "", "", fmt.Sprintf("an agora grant has no paths: %s maps only as %s or %s(./**), the workspace", name, name, name)
		}
		if name == ccRead {
			return tools("read_file"), "Read(./**)", "", ""
		}
		return tools("write_file"), "Edit(./**)", "write_file gives claude Edit and Write together, under the workspace", ""
	case ccWebFetch:
		host, ok := strings.CutPrefix(content, "domain:")
		if !ok {
			return g, "", "", "want WebFetch(domain:HOST)"
		}
		rule := grant.EgressRule{Host: host}
		if err := rule.Validate(); err != nil {
			return g, "", "", err.Error()
		}
		g = tools("http_fetch")
		g.Egress = []grant.EgressRule{rule}
		return g, "WebFetch(domain:" + host + ")", "", ""
	}
	if strings.HasPrefix(name, "mcp__") {
		return g, "", "", "an MCP tool; agora loads MCP servers only from a capability's mcp.json"
	}
	return g, "", "", fmt.Sprintf("agora cannot express %s(...); it maps Bash(COMMAND), Read(./**), Edit(./**) and WebFetch(domain:HOST)", name)
}

// bashEntry maps Bash(content): literal words, optionally followed by ":*" (Claude Code's
// older prefix form) or " *" (any further words, or none). A program that runs what its
// arguments name (env, xargs, python, ssh, git, make, npx, docker, go, ...:
// [cmdread.RunsAnything]) with any arguments maps as written, with a note saying it reaches
// any program: the file grants that in Claude Code too.
func bashEntry(content string) (g grant.Set, want, note, refused string) {
	g, want, refused = bashPattern(content)
	if refused != "" || !strings.HasSuffix(g.Commands[0], " **") {
		return g, want, "", refused
	}
	prog := strings.Fields(g.Commands[0])[0]
	if cmdread.RunsAnything(cmdread.ProgName(prog)) {
		note = fmt.Sprintf("%s runs the programs or code its arguments, files or configuration name (a launcher): with any arguments it can run anything in the sandbox", prog)
	}
	return g, want, note, ""
}

// bashPattern is the command pattern of Bash(content) and the rule it translates back to.
func bashPattern(content string) (g grant.Set, want, refused string) {
	prefix, rest := strings.CutSuffix(content, ":*")
	if !rest {
		prefix, rest = strings.CutSuffix(content, " *")
	}
	words := strings.Fields(prefix)
	if len(words) == 0 || prefix == "*" {
		return g, "", "names no program; write Bash for any command"
	}
	if strings.Join(words, " ") != prefix {
		return g, "", "write the words with single spaces, as a command line has them"
	}
	pattern := prefix
	if rest {
		pattern += " **"
	}
	p, err := grant.ParseCommandPattern(pattern)
	if err != nil {
		return g, "", err.Error()
	}
	if p.RunsAnyLine() {
		return g, "", fmt.Sprintf("%q names a shell, so any command line would run; write Bash if that is meant", prefix)
	}
	rule, why := bashRule(pattern)
	if why != "" {
		return g, "", why
	}
	g = tools("run_command")
	g.Commands = []string{pattern}
	return g, rule, ""
}

func tools(names ...string) grant.Set { return grant.Set{Tools: names} }

// maxToolEntry caps one entry of a subagent's tools.
const maxToolEntry = 1024

// splitToolEntry splits "Name" or "Name(content)" as Claude Code's permission rules are
// written, or says why entry is neither.
func splitToolEntry(entry string) (name, content string, args bool, why string) {
	if len(entry) > maxToolEntry {
		return "", "", false, fmt.Sprintf("longer than %d bytes", maxToolEntry)
	}
	name, content, args = strings.Cut(entry, "(")
	if args {
		var closed bool
		content, closed = strings.CutSuffix(content, ")")
		if !closed {
			return "", "", false, "want NAME or NAME(ARGUMENTS), with the closing parenthesis last"
		}
		if content == "" {
			return "", "", false, "empty parentheses; write the name alone"
		}
	}
	if name == "" {
		return "", "", false, "names no tool"
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || i > 0 && (r >= '0' && r <= '9' || r == '-')) {
			return "", "", false, "a tool name is letters, digits, _ and -"
		}
	}
	return name, content, args, ""
}
