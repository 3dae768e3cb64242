package claudert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
)

// Grants is what the subagent may do: its [grant.Set] (agora tool names, argv allow-patterns
// for run_command, egress hosts for http_fetch) and the MCP servers whose tools it may call.
//
// MCPServers names the servers of the capability's MCP config (see [MCPServerNames]) whose
// tools are pre-approved; a server loaded by [Config.MCPConfig] but not named here is
// started, but every call to its tools is denied.
type Grants struct {
	grant.Set
	MCPServers []string
	// LearnFetch (a learn dispatch's widened fence only, docs/learn.md): WebFetch is loaded
	// and allowed to any host. Claude's fence then names no host; the egress proxy, which
	// every fetch goes through, is the judge: the grant's hosts pass, a host of
	// egress.learn_hosts passes recorded as net.would_deny (method and path), every other
	// host is refused there.
	LearnFetch bool
}

// Claude Code's built-in tool names, as its permission rules and --tools spell them
// (https://code.claude.com/docs/en/tools-reference). Older releases also had LS, MultiEdit,
// NotebookRead, Task (now Agent), BashOutput and KillShell; they are denied by name too.
const (
	ccRead      = "Read"
	ccEdit      = "Edit"
	ccWrite     = "Write"
	ccGlob      = "Glob"
	ccGrep      = "Grep"
	ccBash      = "Bash"
	ccWebFetch  = "WebFetch"
	ccTodoWrite = "TodoWrite"
)

// readFamily are the tools Claude Code's Read rules reach "best-effort" (a Read rule also
// applies to Grep and Glob, https://code.claude.com/docs/en/permissions). They are denied by
// name only when none of them is granted: a bare "Read" deny could take Glob and Grep with it.
var readFamily = []string{ccGlob, ccGrep, "LS", "LSP", "NotebookRead", ccRead}

// knownTools is every built-in tool claudert denies by name when it is not granted. --tools
// already leaves out anything not granted, including tools newer than this list; the deny
// rules are the second, version-independent fence.
var knownTools = []string{
	"Agent", "Artifact", "AskUserQuestion", ccBash, "BashOutput", "CronCreate", "CronDelete",
	ccEdit, "EnterWorktree", "ExitWorktree", ccGlob, ccGrep, "KillShell", "LS", "LSP",
	"ListMcpResourcesTool", "MultiEdit", "NotebookEdit", "NotebookRead", "PowerShell", ccRead,
	"ReadMcpResourceTool", "Skill", "SlashCommand", "Task", "TaskOutput", "TaskStop",
	ccWebFetch, "WebSearch", ccWrite,
}

// translation is the whole mapping of one Grants value.
type translation struct {
	tools   []string // built-in tools claude may load (--tools)
	allowed []string // permission allow rules (--allowedTools)
	dropped []string // grants not translated, each with its reason
}

// Tools returns the built-in Claude Code tools the grants make available (claude's --tools;
// everything else is not loaded at all), sorted:
//
//   - read_file: Read
//   - write_file: Edit, Write
//   - list_files: Glob (LS no longer exists in Claude Code)
//   - search_files: Grep, Glob
//   - run_command: Bash, when at least one command pattern translates
//   - http_fetch: WebFetch, when at least one egress host translates
//   - ask_human: nothing (claude --print cannot ask a person; the subagent can still end
//     with a question in its answer)
//
// TodoWrite, Claude Code's in-memory task list, is always available: it touches nothing.
func Tools(g Grants) []string { return translate(g).tools }

// AllowedTools returns the permission allow rules for the grants (claude's --allowedTools),
// sorted. Under the "dontAsk" permission mode a call no rule allows is denied, except that
// Claude Code runs reads inside the working directory (Read, Glob, Grep) and a built-in set
// of read-only shell commands without asking whenever the tool is loaded.
//
//   - read_file: Read(./**), reads under the working directory (a bare Read would also allow
//     reading anywhere else in the sandbox)
//   - write_file: Edit(./**), edits under the working directory; Edit rules apply to every
//     built-in tool that edits files, Write included
//   - run_command: one Bash rule per command pattern: literal words "git status" become
//     Bash(git status), an exact match; literal words then "**" become Bash(git diff *),
//     "git diff" followed by a space and anything, or nothing. A pattern with a glob word
//     ("*", "*.go", "[ab]") is DROPPED: Claude Code's * matches any number of words, so
//     "git diff *" (one argument) would widen to any argument list. A word a shell would
//     interpret, or that Claude Code's rule syntax reserves (":" "," "(" ")"), is dropped
//     too, since Claude Code runs the command through a shell.
//     A pattern that names a shell to run any line ("bash -c *", "bash -lc *", "sh -c *")
//     becomes Bash, every command.
//   - http_fetch: WebFetch(domain:HOST) per exact egress host. "*.example.com" is DROPPED:
//     Claude Code's wildcard domain rule also matches example.com itself
//     (https://github.com/anthropics/claude-code/issues/67244), which the grant excludes.
//   - MCPServers: mcp__NAME, every tool of that server.
//
// These rules are claude's own fence, not agora's: claude runs its built-in read-only
// commands (cat, ls, git log, ...) without any rule, accepts output redirections after a
// matching command and strips wrappers such as timeout and nohup. agora's PreToolUse hook
// judges every Bash line against the grant itself before claude's rules are consulted
// (grant.CommandLineAllowed): one simple command a pattern names, or any line when a pattern
// names the shell; everything else is refused there.
func AllowedTools(g Grants) []string { return translate(g).allowed }

// DisallowedTools returns the tools denied by name (claude's --disallowedTools), sorted: every
// known built-in tool that [Tools] does not make available, WebSearch (server-side search is
// never host-restricted), Agent (a subagent would be a second loop under the same rules) and
// AskUserQuestion always among them. The read tools are listed only when none of them is
// granted (see readFamily).
func DisallowedTools(g Grants) []string {
	tools := Tools(g)
	keepReads := slices.ContainsFunc(readFamily, func(t string) bool { return slices.Contains(tools, t) })
	var out []string
	for _, t := range knownTools {
		if slices.Contains(tools, t) || (keepReads && slices.Contains(readFamily, t)) {
			continue
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Dropped returns, for people and logs, every grant that did not become a tool or a rule and
// why; empty when everything translated exactly.
func Dropped(g Grants) []string { return translate(g).dropped }

func translate(g Grants) translation {
	var tr translation
	tools := map[string]bool{ccTodoWrite: true}
	allowed := map[string]bool{}
	for _, t := range g.Tools {
		switch t {
		case "read_file":
			tools[ccRead] = true
			allowed["Read(./**)"] = true
		case "write_file":
			tools[ccEdit], tools[ccWrite] = true, true
			allowed["Edit(./**)"] = true
		case "list_files":
			tools[ccGlob] = true
		case "search_files":
			tools[ccGrep], tools[ccGlob] = true, true
		case "run_command":
			for _, c := range g.Commands {
				if p, err := grant.ParseCommandPattern(c); err == nil && p.RunsAnyLine() {
					// The grant names a shell: any line may run, and agora's pre-tool hook,
					// which judges every line against the grant, lets it.
					tools[ccBash] = true
					allowed[ccBash] = true
					continue
				}
				rule, why := bashRule(c)
				if why != "" {
					tr.dropped = append(tr.dropped, fmt.Sprintf("command %q: %s", c, why))
					continue
				}
				tools[ccBash] = true
				allowed[rule] = true
			}
		case "http_fetch":
			for _, h := range g.Egress {
				rule, why := webFetchRule(h)
				if why != "" {
					tr.dropped = append(tr.dropped, fmt.Sprintf("egress %q: %s", h.String(), why))
					continue
				}
				tools[ccWebFetch] = true
				allowed[rule] = true
			}
		case "ask_human":
			tr.dropped = append(tr.dropped, `tool "ask_human": claude --print cannot ask a person`)
		default:
			tr.dropped = append(tr.dropped, fmt.Sprintf("tool %q: not an agora tool claudert knows", t))
		}
	}
	if g.LearnFetch {
		tools[ccWebFetch] = true
		allowed[ccWebFetch] = true
	}
	for _, s := range g.MCPServers {
		if why := checkMCPServerName(s); why != "" {
			tr.dropped = append(tr.dropped, fmt.Sprintf("mcp server %q: %s", s, why))
			continue
		}
		allowed["mcp__"+s] = true
	}
	tr.tools = slices.Sorted(maps.Keys(tools))
	tr.allowed = slices.Sorted(maps.Keys(allowed))
	slices.Sort(tr.dropped)
	tr.dropped = slices.Compact(tr.dropped)
	return tr
}

// bashRule translates one agora command pattern, or says why it cannot be translated
// without widening it.
func bashRule(pattern string) (rule, why string) {
	words := strings.Fields(pattern)
	rest := len(words) > 0 && words[len(words)-1] == "**"
	if rest {
		words = words[:len(words)-1]
	}
	if len(words) == 0 {
		return "", "names no program"
	}
	for i, w := range words {
		switch {
		case strings.ContainsAny(w, "*?["):
			return "", fmt.Sprintf("word %q is a wildcard; Claude Code's * matches any number of words, which would widen it", w)
		case !safeWord(w):
			return "", fmt.Sprintf("word %q has a character a shell or Claude Code's rule syntax would interpret", w)
		case i == 0 && strings.Contains(w, "="):
			return "", fmt.Sprintf("program %q would read as a variable assignment", w)
		}
	}
	if rest {
		return "Bash(" + strings.Join(words, " ") + " *)", ""
	}
	return "Bash(" + strings.Join(words, " ") + ")", ""
}

// safeWord reports whether w means the same to a shell as to argv and nothing to Claude
// Code's rule syntax: letters, digits and . _ / - + = @ % only.
func safeWord(w string) bool {
	for _, r := range w {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("._/-+=@%", r):
		default:
			return false
		}
	}
	return w != ""
}

// webFetchRule translates one egress rule into a WebFetch domain rule. Ports, methods and
// paths have no WebFetch form: the egress proxy, which every fetch goes through, enforces them.
func webFetchRule(r grant.EgressRule) (rule, why string) {
	h := r.Host
	if strings.HasPrefix(h, "*.") {
		return "", "Claude Code's *.domain rule also matches the domain itself, which the grant excludes"
	}
	if !grant.ValidEgress(h) {
		return "", "not a lowercase host name"
	}
	return "WebFetch(domain:" + h + ")", ""
}

// checkMCPServerName says why an MCP server name cannot become an mcp__NAME rule, or "".
// A name with "__" would be ambiguous with mcp__server__tool.
func checkMCPServerName(s string) string {
	if s == "" || len(s) > 64 {
		return "want 1 to 64 characters"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return "want letters, digits, _ and - only"
		}
	}
	if strings.Contains(s, "__") {
		return `contains "__", which Claude Code reads as a server/tool separator`
	}
	return ""
}
