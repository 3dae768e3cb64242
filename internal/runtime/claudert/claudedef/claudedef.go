// Package claudedef describes the claude-code runtime for both sides of the sandbox: package
// runtimes lists [Runtime]; the worker runs it through package claudeadapter.
package claudedef

import "github.com/agora-dev/agora/internal/runtime/runtimes/spec"

// Name is the runtime's name in a subagent document and a manifest.
const Name = "claude-code"

// Runtime is the Claude Code CLI, its tools judged by agora's hooks.
var Runtime = spec.Runtime{Name: Name, CLI: spec.CLI{Program: "claude", NPM: "@anthropic-ai/claude-code", Native: []spec.Native{
	{Arch: "amd64", Package: "@anthropic-ai/claude-code-linux-x64", Path: "claude"},
	{Arch: "arm64", Package: "@anthropic-ai/claude-code-linux-arm64", Path: "claude"},
}},
	Model: spec.Route{API: spec.APIAnthropic, BaseURLKey: spec.AnthropicBaseURLKey, KeyKey: spec.AnthropicKeyKey,
		DefaultBaseURL: spec.AnthropicDefaultBaseURL}, HoldsApproval: true, Needs: spec.Needs{SystemPrompt: true}, MCP: true}
