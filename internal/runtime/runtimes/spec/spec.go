// Package spec is the shape of a runtime's description: its name, the host CLI it runs, how it
// reaches its model, whether it can hold a call for approval, what a subagent of it must
// declare, and (the worker's side) what the worker hands it. Each runtime's directory holds
// its description as a value of [Runtime] (internal/runtime/<dir>/<name>def); package
// runtimes lists them, one line each.
//
// spec imports nothing and holds no state: both sides of the sandbox link it, and each
// runtime's description imports it without reaching the list (which imports them).
package spec

// Runtime is what agora knows about one agent runtime.
type Runtime struct {
	// Name is the runtime's name in a subagent document and a manifest ("codex").
	Name string
	// CLI is the host-installed program the sandbox runs; the zero CLI for a runtime that
	// runs inside agora's own worker (exec, openai).
	CLI CLI
	// Model is how the runtime reaches its model through the per-dispatch gateway; the zero
	// Route for a runtime that reaches none (exec).
	Model Route
	// HoldsApproval reports whether the runtime can hold a call for a person's approval
	// before it runs. One that cannot is refused a grant with approve rules: for a fixed
	// command (exec) only when its command needs approval, for an agent whenever the grant
	// has any (codex runs with approval_policy "never": see docs/runtimes.md, Approvals).
	HoldsApproval bool
	// Needs is what a subagent of this runtime must declare.
	Needs Needs
	// MCP reports whether the runtime loads the MCP servers its capabilities declare (each
	// capability's mcp.json, read by the worker from the verified archives only).
	MCP bool
}

// CLI is a host-installed agent CLI.
type CLI struct {
	// Program is the command name looked up on PATH and the name it is bound under in the
	// sandbox ("claude", "codex").
	Program string
	// NPM is the npm package that installs it.
	NPM string
	// Native lists, for each GOARCH, the npm package holding the native executable and the
	// executable's path inside it (NPM's entry point is a launcher).
	Native []Native
}

// Native is where an npm-installed CLI keeps its native executable on one architecture.
type Native struct {
	Arch    string // GOARCH
	Package string // the npm package holding it
	Path    string // its path inside the package
}

// NativeFor returns c's native executable on arch.
func (c CLI) NativeFor(arch string) (Native, bool) {
	for _, n := range c.Native {
		if n.Arch == arch {
			return n, true
		}
	}
	return Native{}, false
}

// Route is how a runtime's model is reached: the gateway API it speaks and the env bundle
// keys that name its endpoint and its key.
type Route struct {
	API            string // APIOpenAI or APIAnthropic
	BaseURLKey     string // a plain value (or a secret) of the env bundles
	KeyKey         string // a secret (or a plain value) of the env bundles
	DefaultBaseURL string
}

// The model APIs the gateway speaks.
const (
	APIOpenAI    = "openai"
	APIAnthropic = "anthropic"
)

// The env bundle keys and default endpoint of each API, from which a description writes its
// Route as a literal of constants: a Route copied from a variable of this package would be
// made at init in every process that links the description (TestNoInitWork, inittrace).
const (
	OpenAIBaseURLKey        = "OPENAI_BASE_URL"
	OpenAIKeyKey            = "OPENAI_API_KEY"
	OpenAIDefaultBaseURL    = "https://api.openai.com/v1"
	AnthropicBaseURLKey     = "ANTHROPIC_BASE_URL"
	AnthropicKeyKey         = "ANTHROPIC_API_KEY"
	AnthropicDefaultBaseURL = "https://api.anthropic.com"
)

// Needs is what a subagent of a runtime must declare.
type Needs struct {
	// Command: the subagent runs a fixed command (and only this runtime takes one).
	Command bool
	// Model: the subagent names its model; ModelHint says where to find one.
	Model     bool
	ModelHint string
	// SystemPrompt: the subagent has a system prompt.
	SystemPrompt bool
}

// Hosted reports whether r runs a host-installed CLI.
func (r Runtime) Hosted() bool { return r.CLI.Program != "" }
