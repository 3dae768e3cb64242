// Package codexdef describes the codex runtime for both sides of the sandbox: package
// runtimes lists [Runtime]; the worker runs it through package codexadapter.
package codexdef

import "github.com/agora-dev/agora/internal/runtime/runtimes/spec"

// Name is the runtime's name in a subagent document and a manifest.
const Name = "codex"

// Runtime is the Codex CLI (codex exec); it speaks the Responses API to the OpenAI endpoint.
var Runtime = spec.Runtime{Name: Name, CLI: spec.CLI{Program: "codex", NPM: "@openai/codex", Native: []spec.Native{
	{Arch: "amd64", Package: "@openai/codex-linux-x64", Path: "vendor/x86_64-unknown-linux-musl/bin/codex"},
	{Arch: "arm64", Package: "@openai/codex-linux-arm64", Path: "vendor/aarch64-unknown-linux-musl/bin/codex"},
}}, Model: spec.Route{API: spec.APIOpenAI, BaseURLKey: spec.OpenAIBaseURLKey, KeyKey: spec.OpenAIKeyKey, DefaultBaseURL: spec.OpenAIDefaultBaseURL},
	Needs: spec.Needs{Model: true, ModelHint: "one `codex debug models` lists", SystemPrompt: true}}
