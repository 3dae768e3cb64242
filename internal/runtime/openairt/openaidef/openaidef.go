// Package openaidef describes the openai runtime for both sides of the sandbox: package
// runtimes lists [Runtime]; the worker runs it through package openaiadapter.
package openaidef

import "github.com/agora-dev/agora/internal/runtime/runtimes/spec"

// Name is the runtime's name in a subagent document and a manifest.
const Name = "openai"

// Runtime is agora's own tool loop over an OpenAI-compatible chat API.
var Runtime = spec.Runtime{Name: Name, Model: spec.Route{API: spec.APIOpenAI, BaseURLKey: spec.OpenAIBaseURLKey, KeyKey: spec.OpenAIKeyKey, DefaultBaseURL: spec.OpenAIDefaultBaseURL}, HoldsApproval: true,
	Needs: spec.Needs{Model: true, SystemPrompt: true}}
