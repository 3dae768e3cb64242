// Package runtimes says what each agent runtime is: its name in a subagent document, the
// host-installed CLI it runs (if any), how it reaches its model through the per-dispatch
// gateway, whether it can hold a call for a person's approval, and what a subagent of it must
// declare. The host (catalog, provision, dispatch, config, runtimebin) and the worker read
// the same table, so a runtime is described once.
//
// runtimes imports only package spec and the runtimes' descriptions (each a leaf over spec)
// and holds no state beyond the fixed table: it is linked on both sides of the sandbox.
// Adding a runtime is its own directory under internal/runtime (the program, its
// description <name>def and the worker's adapter <name>adapter) and its line in [All]; `go
// generate` then writes the worker's table of adapters from that line (docs/runtimes.md,
// Adding a runtime).
package runtimes

import (
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/runtime/claudert/claudedef"
	"github.com/agora-dev/agora/internal/runtime/codexrt/codexdef"
	"github.com/agora-dev/agora/internal/runtime/execrt/execdef"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaidef"
	"github.com/agora-dev/agora/internal/runtime/runtimes/spec"
)

// The description's types are package spec's, which each runtime's description imports.
type (
	Runtime = spec.Runtime
	CLI     = spec.CLI
	Native  = spec.Native
	Route   = spec.Route
	Needs   = spec.Needs
)

// The model APIs the gateway speaks.
const (
	APIOpenAI    = spec.APIOpenAI
	APIAnthropic = spec.APIAnthropic
)

// Default is the runtime of a subagent that names none.
const Default = execdef.Name

// All lists every runtime, in the order documents list them: the registry, one line each.
// The worker's table of adapters (package runtimes/adapters) is generated from this line
// (`go generate ./internal/runtime/...`; TestAdapters_Generated fails when it drifts).
func All() []Runtime {
	return []Runtime{
		execdef.Runtime,
		claudedef.Runtime,
		openaidef.Runtime,
		codexdef.Runtime,
	}
}

// ExecOnly reports whether the exec-only worker runs the runtime called name: agora-worker-exec,
// cmd/agora-worker built with the agora_worker_exec tag, whose table of adapters
// (runtimes/adapters/adapters_exec.go) holds exec's alone.
func ExecOnly(name string) bool { return name == execdef.Name }

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

// Problems says what a subagent of r lacks or has too much of, one phrase each, none when
// nothing: its command, model and system prompt as declared.
func Problems(r Runtime, command []string, model, systemPrompt string) []string {
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
