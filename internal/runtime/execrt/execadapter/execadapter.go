// Package execadapter is the worker's adapter of the exec runtime: it runs the subagent's
// command as it is (package execrt), under the agent's budget.
package execadapter

import (
	"context"

	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/execrt"
)

// Adapter runs the subagent's command as it is.
type Adapter struct{}

// Run runs inv's command in its workspace.
func (Adapter) Run(ctx context.Context, inv agentrun.Invocation) (agentrun.Exit, error) {
	res, err := execrt.Run(ctx, execrt.Spec{
		Argv:    inv.Command,
		Dir:     inv.Dir,
		Env:     inv.Env,
		Stdout:  inv.Stdout,
		Stderr:  inv.Stderr,
		Timeout: inv.Timeout,
	})
	if err != nil {
		return agentrun.Exit{}, err
	}
	return agentrun.Exit{ExitCode: res.ExitCode, TimedOut: res.TimedOut}, nil
}
