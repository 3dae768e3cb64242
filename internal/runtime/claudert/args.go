package claudert

import (
	"io"
	"strconv"
	"strings"
	"time"
)

// PermissionMode is the Claude Code permission mode claudert runs in. "dontAsk" auto-denies
// every tool call that is not pre-approved by an allow rule instead of prompting
// (https://code.claude.com/docs/en/permission-modes): it never waits for a person and never
// approves beyond the rules, unlike "default" (prompts), "acceptEdits" (approves edits and
// some filesystem commands), "auto" (a classifier approves) and "bypassPermissions"
// (approves everything). An older claude without it refuses the flag, so the run fails
// closed.
const PermissionMode = "dontAsk"

// Config describes one run of claude.
type Config struct {
	// Binary is the claude executable: a name looked up in the PATH of Env (never the
	// worker's), or a path. Empty means "claude".
	Binary string
	// SystemPrompt is the subagent's system prompt, appended to Claude Code's own (which
	// carries the tool-use instructions its loop relies on). It reaches claude through a
	// private file (--append-system-prompt-file), never argv. Empty adds nothing.
	SystemPrompt string
	// Model is passed as --model; empty leaves claude's default.
	Model string
	// Grants decide the tools and permission rules; see [Tools], [AllowedTools] and
	// [DisallowedTools].
	Grants Grants
	// MCPConfig is the absolute path of the capability's MCP config file (the
	// {"mcpServers": {...}} shape), or "". claude loads MCP servers from it and from nowhere
	// else (--strict-mcp-config), so a .mcp.json in the workspace is ignored.
	MCPConfig string
	// MaxTurns is passed as --max-turns; 0 leaves claude's default (no limit).
	MaxTurns int
	// Dir is the working directory, the workspace. It MUST be set.
	Dir string
	// Env is claude's complete environment (KEY=VALUE); nothing is inherited. Its PATH is
	// where Binary is looked up.
	Env []string
	// Timeout is the wall-clock budget; when it is spent claude's whole process group is
	// killed and Run returns [ErrTimedOut]. 0 means no budget.
	Timeout time.Duration
	// Stderr receives claude's stderr as it is written; nil discards it (Run still keeps a
	// short tail for its errors).
	Stderr io.Writer
	// Transcript receives every stream-json event claude writes, one JSON object per line,
	// unredacted (the caller redacts); nil discards them. It MUST NOT be the same writer as
	// Stderr unless that writer is safe for concurrent use.
	Transcript io.Writer
	// TempDir holds the private prompt and settings files for the length of the run; empty
	// means os.TempDir(). It MUST NOT be inside the workspace.
	TempDir string
	// HookCommand, when not empty, is the argv of the command claude runs at each of
	// [HookEvents] for every tool call, with the event's JSON on stdin. It reaches claude
	// through a private settings file (--settings), never the workspace's. It MUST hold no
	// secret: a hook's argv is visible to every process in the sandbox.
	HookCommand []string
	// HookTimeout is how long, in seconds, claude lets each hook run; zero means
	// [HookTimeout]. A hook that holds a call for a person's approval needs more than the
	// approval timeout: claude lets a call through when its PreToolUse hook times out.
	HookTimeout int
	// Observer, when not nil, sees claude's events as Run parses them; see [Observer].
	Observer Observer
}

// Args returns the exact arguments Run passes to claude after the program name, for cfg,
// the system prompt file systemPromptFile and the settings file settingsFile ("" for none).
// Single-valued flags use the --flag=value form, so no value can be read as a flag; the
// prompt is not among them (it goes to stdin).
//
//   - --print, --verbose, --output-format=stream-json, --input-format=text: one
//     non-interactive run, events as JSON lines (stream-json requires --verbose);
//   - --permission-mode=dontAsk: see [PermissionMode];
//   - --setting-sources= (empty): no user, project or local settings files, so neither
//     the workspace's .claude/settings.json (allow rules, hooks that run commands) nor
//     ~/.claude can change the permissions; managed policy settings still apply (the Agent
//     SDK's isolation mode, settingSources: [], is the same flag:
//     https://platform.claude.com/docs/en/agent-sdk/claude-code-features);
//   - --settings=FILE: the hooks of [Config.HookCommand] (see [HookEvents]). Settings given
//     on the command line are a scope of their own, not one of the --setting-sources, so
//     they load when the files do not (https://code.claude.com/docs/en/settings; the runs
//     in anthropics/claude-code#82747 and anthropics/claude-code#92541 pass exactly this pair);
//   - --strict-mcp-config and --mcp-config=FILE: MCP servers from Config.MCPConfig only;
//   - --tools=LIST, --allowedTools RULE..., --disallowedTools NAME...: see [Tools],
//     [AllowedTools] and [DisallowedTools]. --tools= (empty) loads no built-in tool.
//
// Reference: https://code.claude.com/docs/en/cli-reference.
func Args(cfg Config, systemPromptFile, settingsFile string) []string {
	a := []string{
		"--print",
		"--verbose",
		"--output-format=stream-json",
		"--input-format=text",
		"--permission-mode=" + PermissionMode,
		"--setting-sources=",
		"--strict-mcp-config",
	}
	if settingsFile != "" {
		a = append(a, "--settings="+settingsFile)
	}
	if cfg.MCPConfig != "" {
		a = append(a, "--mcp-config="+cfg.MCPConfig)
	}
	if cfg.Model != "" {
		a = append(a, "--model="+cfg.Model)
	}
	if cfg.MaxTurns > 0 {
		a = append(a, "--max-turns="+strconv.Itoa(cfg.MaxTurns))
	}
	if systemPromptFile != "" {
		a = append(a, "--append-system-prompt-file="+systemPromptFile)
	}
	tr := translate(cfg.Grants)
	a = append(a, "--tools="+strings.Join(tr.tools, ","))
	if len(tr.allowed) > 0 {
		a = append(a, "--allowedTools")
		a = append(a, tr.allowed...)
	}
	a = append(a, "--disallowedTools")
	a = append(a, DisallowedTools(cfg.Grants)...)
	return a
}
