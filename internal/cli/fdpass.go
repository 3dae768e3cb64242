package cli

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/compute/fdpass"
)

// fdpassOptions are the program and arguments fdpass execs.
type fdpassOptions struct {
	argv []string
}

// newFdpassCmd is a container's entrypoint when the worker has secrets: the container
// provider sends them on stdin, and fdpass hands them to the worker as fd 3
// (internal/compute/fdpass). People never run it.
func newFdpassCmd(runF func(*fdpassOptions) error) *cobra.Command {
	opts := &fdpassOptions{}
	return &cobra.Command{
		Use:                "fdpass -- PROGRAM [ARG]...",
		Short:              "Run a program with stdin moved to fd 3 (a container's entrypoint, not for people)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || args[0] != "--" {
				return usageErrorf(cmd, "want: agora fdpass -- PROGRAM [ARG]...")
			}
			opts.argv = args[1:]
			return runCmd(cmd, opts, runF, fdpassRun)
		},
	}
}

func fdpassRun(_ context.Context, opts *fdpassOptions) error {
	// Exec returns only on failure; the program's environment is this process's, which the
	// container engine set from the spec.
	return fdpass.Exec(opts.argv, os.Environ())
}
