// Package codexrt is the codex agent runtime: it runs OpenAI's Codex CLI (`codex exec
// --json`) non-interactively on one prompt, with a private CODEX_HOME holding a generated
// config.toml, and parses the CLI's JSONL events as they arrive into a [Result] and a
// stream of items shown to an [Observer] (the caller audits each command and file change
// live from them).
//
// codexrt runs INSIDE the sandbox, in the worker process, and starts codex through package
// execrt (its own process group, a complete environment, a budget). The generated config
// points codex's only model provider at the caller's base URL (the gateway, through the
// worker's loopback relay) with the Responses wire API and no retries, turns off analytics,
// feedback, plugins, apps, update checks and web search, and sets approval_policy "never"
// and sandbox_mode "danger-full-access": agora's bubblewrap sandbox is the boundary, and
// codex's own nested bwrap would need namespaces the outer sandbox denies. The key codex
// sends is a per-run relay token, never a model key: the gateway adds the real one.
//
// codexrt never puts the prompt in argv (it goes through a private file on stdin, `codex
// exec -`), never reads a secret, and keeps only a short tail of codex's stderr for error
// messages. It writes the JSONL transcript unredacted to the caller's writer; the caller
// redacts.
package codexrt

import "github.com/agora-dev/agora/internal/runtime/codexrt/codexdef"

// Name is the runtime name a subagent document uses for this runtime.
const Name = codexdef.Name
