package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// The names of internal/cli/cmdutil that the dispatch files of this package use
// unqualified; a file that moves to its noun's package uses cmdutil's own names instead.

type (
	// Factory is [cmdutil.Factory]: cmd/agora-full and the tests that drive the whole tree
	// build one with [NewFactory].
	Factory = cmdutil.Factory
	// IOStreams is [cmdutil.IOStreams].
	IOStreams = cmdutil.IOStreams

	usageError       = cmdutil.UsageError
	interruptedError = cmdutil.InterruptedError
	exitError        = cmdutil.ExitCodeError
)

const (
	formatJSON = cmdutil.FormatJSON
	exitOK     = cmdutil.ExitOK
)

var (
	noArgs      = cmdutil.NoArgs
	usageErrorf = cmdutil.UsageErrorf
	interrupted = cmdutil.Interrupted
)

func runCmd[O any](cmd *cobra.Command, opts O, runF func(O) error, run func(context.Context, O) error) error {
	return cmdutil.RunCmd(cmd, opts, runF, run)
}

// orchPaths returns AGORA_HOME/orch, creating it 0700 ([cmdutil.Factory.OrchDir]).
func orchPaths(f *cmdutil.Factory) (string, error) { return f.OrchDir() }
