// Package runtimes says what each agent runtime is: its name in a subagent document, the
// host-installed CLI it runs (if any), how it reaches its model through the per-dispatch
// gateway, whether it can hold a call for a person's approval, and what a subagent of it must
// declare. The host (catalog, provision, dispatch, config, runtimebin) and the worker read
// the same table, so a runtime is described once.
//
// runtimes imports the standard library only and holds no state beyond the fixed table: it is
// linked on both sides of the sandbox. Adding a runtime is its own directory under
// internal/runtime (the program), a [Runtime] value here and its line in [All]; the worker
// maps the name to its adapter (internal/worker/agent.go runtimeFor).
package runtimes

import (
	"slices"
	"strings"
)

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

// The runtimes' names, for the packages that implement them (a const each).
const (
	NameExec       = "exec"
	NameOpenAI     = "openai"
	NameClaudeCode = "claude-code"
	NameCodex      = "codex"
)

var openAIRoute = Route{API: APIOpenAI, BaseURLKey: "OPENAI_BASE_URL", KeyKey: "OPENAI_API_KEY", DefaultBaseURL: "https://api.openai.com/v1"}

// The runtimes.
var (
	// Exec runs the subagent's command as it is.
	Exec = Runtime{Name: NameExec, Needs: Needs{Command: true}}
	// OpenAI is agora's own tool loop over an OpenAI-compatible chat API.
	OpenAI = Runtime{Name: NameOpenAI, Model: openAIRoute, HoldsApproval: true,
		Needs: Needs{Model: true, SystemPrompt: true}}
	// ClaudeCode is the Claude Code CLI, its tools judged by agora's hooks.
	ClaudeCode = Runtime{Name: NameClaudeCode, CLI: CLI{Program: "claude", NPM: "@anthropic-ai/claude-code", Native: []Native{
		{"amd64", "@anthropic-ai/claude-code-linux-x64", "claude"},
		{"arm64", "@anthropic-ai/claude-code-linux-arm64", "claude"},
	}},
		Model:         Route{API: APIAnthropic, BaseURLKey: "ANTHROPIC_BASE_URL", KeyKey: "ANTHROPIC_API_KEY", DefaultBaseURL: "https://api.anthropic.com"},
		HoldsApproval: true, Needs: Needs{SystemPrompt: true}}
	// Codex is the Codex CLI (codex exec); it speaks the Responses API to the OpenAI endpoint.
	Codex = Runtime{Name: NameCodex, CLI: CLI{Program: "codex", NPM: "@openai/codex", Native: []Native{
		{"amd64", "@openai/codex-linux-x64", "vendor/x86_64-unknown-linux-musl/bin/codex"},
		{"arm64", "@openai/codex-linux-arm64", "vendor/aarch64-unknown-linux-musl/bin/codex"},
	}}, Model: openAIRoute,
		Needs: Needs{Model: true, ModelHint: "one `codex debug models` lists", SystemPrompt: true}}
)

// Default is the runtime of a subagent that names none.
const Default = NameExec

// All lists every runtime, in the order documents list them.
func All() []Runtime { return []Runtime{Exec, ClaudeCode, OpenAI, Codex} }

// Lookup returns the runtime called name.
func Lookup(name string) (Runtime, bool) {
	for _, r := range All() {
		if r.Name == name {
			return r, true
		}
	}
	return Runtime{}, false
}

// Names lists every runtime's name, in [All]'s order.
func Names() []string {
	var out []string
	for _, r := range All() {
		out = append(out, r.Name)
	}
	return out
}

// Hosted lists, sorted, the names of the runtimes whose CLI is installed on the host.
func Hosted() []string {
	var out []string
	for _, r := range All() {
		if r.CLI.Program != "" {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Hosted reports whether r runs a host-installed CLI.
func (r Runtime) Hosted() bool { return r.CLI.Program != "" }

// Problems says what spec lacks or has too much of for r, one phrase each, "" for none:
// the subagent's command, model and system prompt as declared.
func (r Runtime) Problems(command []string, model, systemPrompt string) []string {
	var out []string
	if r.Needs.Command && len(command) == 0 {
		out = append(out, "the "+r.Name+" runtime needs a command (--command or command:)")
	}
	if r.Needs.Model && model == "" {
		p := "the " + r.Name + " runtime needs a model (--model)"
		if r.Needs.ModelHint != "" {
			p += ", " + r.Needs.ModelHint
		}
		out = append(out, p)
	}
	if r.Needs.SystemPrompt && systemPrompt == "" {
		out = append(out, "the "+r.Name+" runtime needs a system prompt (--system-prompt or --prompt-file)")
	}
	if !r.Needs.Command && len(command) > 0 {
		out = append(out, "command applies to the "+strings.Join(commandRuntimes(), ", ")+" runtime only, not "+r.Name)
	}
	return out
}

func commandRuntimes() []string {
	var out []string
	for _, r := range All() {
		if r.Needs.Command {
			out = append(out, r.Name)
		}
	}
	return out
}
