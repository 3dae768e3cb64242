package grant

import "github.com/agora-dev/agora/internal/shellwords"

// A call held for approval reaches the host (the gateway's /approval) from inside the
// sandbox, where anything may forge it: a granted curl can name any tool and any rule. The
// host therefore decides for itself, from the dispatch's grant, whether an approve rule holds
// the call and which one; the functions here are that judgement, shared by the gateway and
// the runtimes' tool paths so that they agree. A runtime MUST hold a call only when these say
// a rule holds it: the gateway refuses any other request for approval.

// ApprovalTool is the agora tool a tool name reported for approval stands for: an agora
// built-in tool is itself; a Claude Code built-in tool is the agora tool that grants it
// (Write, Edit, MultiEdit and NotebookEdit: write_file; Read: read_file; Glob: list_files;
// Grep: search_files; WebFetch: http_fetch; Bash: run_command). Any other name (an MCP tool,
// TodoWrite, a name made up in the sandbox) is "": no approve rule holds it.
func ApprovalTool(name string) string {
	if IsBuiltinTool(name) {
		return name
	}
	switch name {
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
		return "write_file"
	case "Read":
		return "read_file"
	case "Glob":
		return "list_files"
	case "Grep":
		return "search_files"
	case "WebFetch":
		return "http_fetch"
	case "Bash":
		return "run_command"
	}
	return ""
}

// HeldCommandLine returns the approve rule that holds a shell command line (Claude Code's
// Bash): when the line is one simple command of literal words ([shellwords.Split]), the rule
// that holds its argv ([NeedsApproval], which reads through wrappers, shells and aliases);
// otherwise the first command rule, since agora cannot tell what the line runs (fail closed:
// holding too much asks a person once more; holding too little runs a call unheld).
func HeldCommandLine(rules []ApproveRule, line string) (ApproveRule, bool) {
	if words, err := shellwords.Split(line); err == nil {
		return NeedsApproval(rules, "run_command", words)
	}
	for _, r := range rules {
		if r.Command != "" {
			return r, true
		}
	}
	return ApproveRule{}, false
}
