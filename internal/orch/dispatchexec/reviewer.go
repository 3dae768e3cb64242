package dispatchexec

import (
	"cmp"
	"fmt"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
)

// A review is the reviewer's final answer, as its worker takes it from the model over a
// channel no process the reviewer starts can write (docs/adr/0001-a-review-is-the-reviewers-final-answer.md).
// ReviewerRefusal refuses, where a plan is checked against the catalog, a reviewer that could
// give no such answer on the target its task runs on; the worker declines to vouch for the
// answer of one that slips through (a subagent changed since), which the host then reads as
// a rejection.

// ReviewerRefusal says why subagent ref, of runtime runtime, may not review a task's work on
// target (named targetName; "" is agora.yaml's default), or nil when it may:
//   - an exec command has no final answer, and shares every channel it could answer through
//     (its files, its output, its exit status) with the code it runs;
//   - on a target with sandbox: none, the reviewer and what it runs are agora's own user,
//     unsandboxed, and could write anything agora keeps;
//   - a CLI runtime (claude-code, codex) on a docker or kubernetes target runs its CLI from a
//     file its own tools can read, so they could ptrace it or write its output pipe, and with
//     it its final answer. Only a local sandbox runs the host's CLI execute-only.
func ReviewerRefusal(ref, runtime, targetName string, target config.Target) error {
	runtime = cmp.Or(runtime, runtimes.Default)
	rt, ok := runtimes.Lookup(runtime)
	if !ok {
		return fmt.Errorf("subagent %q runs runtime %q, which this agora does not know, so it cannot review", ref, runtime)
	}
	if rt.Model.API == "" {
		return fmt.Errorf("subagent %q runs the %s runtime and cannot review: a review is a model's judgment, taken from its "+
			"final answer, which no process it starts can write, and a command has no final answer: it shares every channel "+
			"it could answer through (its files, its output, its exit status) with the code it runs. Put the command's check "+
			"in the task's verify gate (verify: {command: [...]}), and review with a subagent of a model runtime (%s)",
			ref, runtime, modelRuntimes())
	}
	if target.Sandbox == compute.SandboxNone {
		return fmt.Errorf("subagent %q cannot review on target %q, which has sandbox: none: the reviewer, and any code it runs, "+
			"would run unsandboxed as agora's own user and could write whatever agora keeps, its review included. Run the "+
			"task on a sandboxed target", ref, cmp.Or(targetName, config.DefaultTarget))
	}
	provider := cmp.Or(target.Provider, config.ProviderLocal)
	if rt.Hosted() && provider != config.ProviderLocal {
		return fmt.Errorf("subagent %q runs %s, whose CLI a %s target (%q) runs from a file the CLI's own tools can read: "+
			"they could write its output, and with it its final answer, which is its review. A %s reviewer reviews only on "+
			"a local target, where agora runs the host's CLI execute-only; review this task's work with an openai subagent, "+
			"or run the task on a local target", ref, runtime, provider, cmp.Or(targetName, config.DefaultTarget), runtime)
	}
	return nil
}

// modelRuntimes names the runtimes that answer with a model's final answer.
func modelRuntimes() string {
	out := ""
	for _, r := range runtimes.All() {
		if r.Model.API == "" {
			continue
		}
		if out != "" {
			out += ", "
		}
		out += r.Name
	}
	return out
}
