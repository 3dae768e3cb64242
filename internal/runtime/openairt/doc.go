// Package openairt is the openai agent runtime: an OpenAI-compatible chat-completions tool
// loop that works with OpenAI, vLLM, Ollama and any other server speaking the same wire
// format, streaming or not. It sends the model the tools it is given, runs the calls the model
// asks for in order, feeds the results back, and stops when the model answers without a tool
// call, when a tool asks a person for input, or when a budget (turns, tokens, wall time) is
// spent.
//
// openairt runs INSIDE the sandbox, in the worker process. The sandbox has no network: the
// caller hands it an *http.Client that dials a host-side gateway over a Unix socket, and the
// gateway injects the API key. So openairt never needs or reads a key: [Config.APIKey] exists
// only for tests outside the sandbox, and when it is empty no Authorization header is sent.
//
// openairt MUST NOT import the store, audit, dispatch or toolreg packages: it sees tools only
// through its own small [Tools] interface (a toolreg View satisfies it), so every permission
// check and audit record stays with the View. It treats every reply as untrusted input:
// bodies are size-capped, decoded in one canonical form, and a model's tool request never
// reaches anything but [Tools.Call]. It writes the transcript unredacted to the caller's
// writer; the caller redacts.
package openairt

import "github.com/agora-dev/agora/internal/runtime/openairt/openaidef"

// Name is the runtime name a subagent document uses for this runtime.
const Name = openaidef.Name
