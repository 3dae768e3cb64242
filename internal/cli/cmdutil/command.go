// Package cmdutil is what every command of agora's command line shares and nothing one noun
// owns: the [Factory] (streams, AGORA_HOME and what the composition root in internal/cli
// builds, opened lazily), the one command shape ([RunCmd], [NewPrintCmd], [Emit]), usage
// errors and the closed set of exit codes, output formats and the home check. It runs on the
// host; it renders nothing itself: internal/cli's Run prints errors and picks the exit code.
// The noun packages beside it (internal/cli/<noun>) import it; it imports none of them.
package cmdutil

import (
	"context"
	"errors"

	"github.com/spf13/cobra"
)

// Every command has one shape, after cli/cli's:
//
//   - xOptions holds the factory and what the command line said, parsed;
//   - newXCmd(f, runF) only parses and validates: a wrong command line is a usage error and
//     opens nothing. Its RunE ends with [RunCmd];
//   - xRun(ctx, opts) does the work.
//
// A test passes runF to stop after parsing and look at the options, or calls xRun with options
// it built. The root command passes nil.

// RunCmd ends every RunE: runF, a test's seam, when one is given, else run once the command's
// home is there ([GateHomes]: the command line is parsed and checked by now). A usage error run
// returns without its command (a request the domain refused) is given cmd, so its hint names
// the command's help.
func RunCmd[O any](cmd *cobra.Command, opts O, runF func(O) error, run func(context.Context, O) error) error {
	if runF != nil {
		return runF(opts)
	}
	if err := checkHomeGate(cmd); err != nil {
		return err
	}
	err := run(cmd.Context(), opts)
	var ue *UsageError
	if errors.As(err, &ue) && ue.Cmd == nil {
		ue.Cmd = cmd
	}
	return err
}

// Emit writes v as one JSON document for --output json, else text renders it for people: the
// tail of every command that shows or lists something.
func Emit[T any](ios *IOStreams, output string, v T, text func(T) error) error {
	if output == FormatJSON {
		return WriteJSON(ios.Out, v)
	}
	return text(v)
}

// PrintOptions are what every command that prints one result has: the factory, its one
// argument (a name, an id, a run; empty for a list) and --output. A command's options embed
// them to be built by [NewPrintCmd].
type PrintOptions struct {
	F      *Factory
	Arg    string
	Output string
}

// Print returns o: embedding PrintOptions makes an options struct a [Printer].
func (o *PrintOptions) Print() *PrintOptions { return o }

// Printer is the options of a command built by [NewPrintCmd].
type Printer interface{ Print() *PrintOptions }

// Validator is options that parse and check the rest of the command line, after --output;
// its error is a usage error.
type Validator interface {
	Validate(cmd *cobra.Command) error
}

// NewPrintCmd completes cmd, whose Use, Short, Args and own flags are set, as a command that
// prints one result (a show, describe, status, list or cancel): RunE takes the argument,
// checks --output and then the options' own validate, and ends with [RunCmd].
func NewPrintCmd[P Printer](cmd *cobra.Command, opts P, runF func(P) error, run func(context.Context, P) error) *cobra.Command {
	po := opts.Print()
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			po.Arg = args[0]
		}
		if err := CheckOutput(cmd, po.Output); err != nil {
			return err
		}
		if v, ok := any(opts).(Validator); ok {
			if err := v.Validate(cmd); err != nil {
				return err
			}
		}
		return RunCmd(cmd, opts, runF, run)
	}
	AddOutputFlag(cmd, &po.Output)
	return cmd
}

// NoArgs is cobra.NoArgs as a usage error that names the command.
var NoArgs = ExactArgs(0, "no arguments")

// ExactArgs is cobra.ExactArgs with a message that names the arguments and counts as a usage
// error.
func ExactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return UsageErrorf(cmd, "%s takes %s (got %d argument(s))", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}
