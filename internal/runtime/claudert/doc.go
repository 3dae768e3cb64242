// Package claudert is the claude-code agent runtime: it runs Anthropic's Claude Code CLI
// (`claude --print`) non-interactively on one prompt, with the subagent's system prompt, the
// model, the capability's MCP servers and only the tools its grants allow, and parses the
// CLI's stream-json output into a transcript and a [Result].
//
// claudert runs INSIDE the sandbox, in the worker process. It starts claude through package
// execrt (a process group with a complete environment, a working directory and a budget), so
// it never inherits the worker's environment and never resolves claude with the worker's own
// PATH. It owns the translation from agora grants to Claude Code permission flags ([Tools],
// [AllowedTools], [DisallowedTools]) and MUST NOT widen a grant: a grant that Claude Code's
// rule syntax cannot express exactly is narrowed or dropped ([Dropped] says which), the
// permission mode never prompts and never approves beyond the allow rules, and no settings,
// hooks or MCP servers are loaded from the workspace, which the agent controls.
//
// claudert gives claude exactly one settings file, its own private one, which holds only the
// caller's tool hooks ([Config.HookCommand], [HookEvents]): that is how the caller audits each
// call live, before it runs and before its result reaches the model. It also shows the
// caller each event as it is parsed ([Observer]): the init event's tool list, each call and
// each result, with claude's own classification of refusals.
//
// claudert never puts the prompt or the system prompt in argv (they go through a private
// file and stdin), never reads a secret, and never interprets claude's stderr beyond keeping
// a short tail for error messages. It writes the transcript unredacted to the caller's
// writer; the caller redacts. The sandbox, not Claude Code's own permission checks, remains
// the security boundary: claudert's flags are defence in depth and the honest statement of
// what the subagent may do.
package claudert

import "github.com/agora-dev/agora/internal/runtime/claudert/claudedef"

// Name is the runtime name a subagent document uses for this runtime.
const Name = claudedef.Name
