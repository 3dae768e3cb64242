package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
)

// Every command has one shape, after cli/cli's:
//
//   - xOptions holds the factory and what the command line said, parsed;
//   - newXCmd(f, runF) only parses and validates: a wrong command line is a usage error and
//     opens nothing. Its RunE ends with runCmd;
//   - xRun(ctx, opts) does the work.
//
// A test passes runF to stop after parsing and look at the options, or calls xRun with options
// it built. NewRootCmd passes nil.

// runCmd ends every RunE: runF, a test's seam, when one is given, else run once the command's
// home is there (homecheck.go: the command line is parsed and checked by now). A usage error run
// returns without its command (a request the domain refused) is given cmd, so its hint names
// the command's help.
func runCmd[O any](cmd *cobra.Command, opts O, runF func(O) error, run func(context.Context, O) error) error {
	if runF != nil {
		return runF(opts)
	}
	if err := checkHomeGate(cmd); err != nil {
		return err
	}
	err := run(cmd.Context(), opts)
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd == nil {
		ue.cmd = cmd
	}
	return err
}

// emit writes v as one JSON document for --output json, else text renders it for people: the
// tail of every command that shows or lists something.
func emit[T any](ios *IOStreams, output string, v T, text func(T) error) error {
	if output == formatJSON {
		return writeJSON(ios.Out, v)
	}
	return text(v)
}

// printOptions are what every command that prints one result has: the factory, its one
// argument (a name, an id, a run; empty for a list) and --output. A command's options embed
// them to be built by [newPrintCmd].
type printOptions struct {
	f      *Factory
	arg    string
	output string
}

func (o *printOptions) print() *printOptions { return o }

// printer is the options of a command built by [newPrintCmd].
type printer interface{ print() *printOptions }

// validator is options that parse and check the rest of the command line, after --output;
// its error is a usage error.
type validator interface {
	validate(cmd *cobra.Command) error
}

// newPrintCmd completes cmd, whose Use, Short, Args and own flags are set, as a command that
// prints one result (a show, describe, status, list or cancel): RunE takes the argument,
// checks --output and then the options' own validate, and ends with runCmd.
func newPrintCmd[P printer](cmd *cobra.Command, opts P, runF func(P) error, run func(context.Context, P) error) *cobra.Command {
	po := opts.print()
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			po.arg = args[0]
		}
		if err := checkOutput(cmd, po.output); err != nil {
			return err
		}
		if v, ok := any(opts).(validator); ok {
			if err := v.validate(cmd); err != nil {
				return err
			}
		}
		return runCmd(cmd, opts, runF, run)
	}
	addOutputFlag(cmd, &po.output)
	return cmd
}

// noArgs is cobra.NoArgs as a usage error that names the command.
var noArgs = exactArgs(0, "no arguments")
