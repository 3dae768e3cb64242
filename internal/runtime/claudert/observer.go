package claudert

import "encoding/json"

// Observer sees claude's events as Run parses them, in the order claude wrote them. Its
// methods are called one at a time on the goroutine that reads claude's output, so claude
// waits on its output pipe while one runs: a method that reports somewhere holds claude's
// later events back until it returns. A method MUST NOT keep a ToolCall's Input after it
// returns.
type Observer interface {
	// Init is called for each well-formed init event (a "tools" array of strings), which
	// claude writes before it asks the model anything.
	Init(Init)
	// ToolCall is called for each tool call in an assistant message, before claude makes
	// it (a subagent's calls included).
	ToolCall(ToolCall)
	// ToolResult is called for each tool result claude sends back to the model.
	ToolResult(ToolResult)
}

// Init is what a system/init event says about the run.
type Init struct {
	// Tools are the tools claude loaded: built-in names and MCP tools as
	// mcp__SERVER__TOOL. A tool its flags do not load is not among them, and claude answers
	// a call to it with a tool_use_error (see [ToolResult.NoSuchTool]).
	Tools []string
	// PermissionMode is the mode claude runs in ("dontAsk" for Run).
	PermissionMode string
}

// ToolCall is one tool call the model asked for.
type ToolCall struct {
	ID, Name string
	// Input is the call's input as claude printed it, unredacted.
	Input json.RawMessage
	// Parent is the id of the Agent call whose subagent made this call, "" at top level.
	Parent string
}

// ToolResult is one tool result claude sent back to the model. Only claude's classification
// is kept, never the content, which is the tool's output.
type ToolResult struct {
	ID      string // the call's ID
	IsError bool
	// UseError is true when the result is claude's own <tool_use_error>: the call was
	// refused before its tool ran, or the tool refused its input.
	UseError bool
	// NoSuchTool is true for the tool_use_error claude answers a call to a tool it did not
	// load with: "<tool_use_error>Error: No such tool available: NAME. NAME exists but is not
	// enabled in this context. ..." from Claude Code 2.1.197, which runs no hook for it and
	// leaves it out of permission_denials.
	NoSuchTool bool
	// PermissionDenied is true for the refusal claude's permission rules answer with:
	// "Permission to use NAME has been denied." (Claude Code 2.1.197; also "... with command
	// CMD has been denied." and "... has been denied because Claude Code is running in don't
	// ask mode."). claude lists such a call in the result's permission_denials.
	PermissionDenied bool
	// HookBlocked is true for the refusal of a blocking PreToolUse hook: "PreToolUse:NAME hook
	// error: " and the hook's reason. claude lists such a call in permission_denials.
	HookBlocked bool
	// Tool is the tool name a PermissionDenied or HookBlocked refusal names, "" otherwise.
	Tool string
}

const (
	toolUseError     = "<tool_use_error>"
	noSuchTool       = "No such tool available"
	permissionPrefix = "Permission to use "
	permissionDenied = " has been denied"
	hookPrefix       = "PreToolUse:"
	hookError        = " hook error: "
)
