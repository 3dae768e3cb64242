// Package cli is agora's command line: the root that wires one package per noun
// (internal/cli/<noun>) into the tree, and the composition root that builds what commands
// open (dispatcher, providers, anchors, serve's hand-off runner). Only this package renders
// errors for people and picks exit codes (cmdutil holds the table).
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/apply"
	"github.com/agora-dev/agora/internal/cli/audit"
	"github.com/agora-dev/agora/internal/cli/capability"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/dispatchcmd"
	"github.com/agora-dev/agora/internal/cli/doctorcmd"
	"github.com/agora-dev/agora/internal/cli/env"
	"github.com/agora-dev/agora/internal/cli/gateway"
	"github.com/agora-dev/agora/internal/cli/gc"
	"github.com/agora-dev/agora/internal/cli/initcmd"
	"github.com/agora-dev/agora/internal/cli/mcp"
	"github.com/agora-dev/agora/internal/cli/orch"
	"github.com/agora-dev/agora/internal/cli/restore"
	"github.com/agora-dev/agora/internal/cli/selftest"
	"github.com/agora-dev/agora/internal/cli/subagent"
	"github.com/agora-dev/agora/internal/cli/verify"
	"github.com/agora-dev/agora/internal/cli/version"
	"github.com/agora-dev/agora/internal/cli/workspace"
	"github.com/agora-dev/agora/internal/tracing"
)

// Main runs agora with the process's arguments and streams and returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := NewFactory(cmdutil.System(), os.Getenv)
	defer f.Close()
	return Run(ctx, f, os.Args[1:])
}

// Run executes one command line and returns its exit code.
func Run(ctx context.Context, f *cmdutil.Factory, args []string) int {
	// A command run inside a trace (TRACEPARENT, as CI systems and tracing-aware tools set
	// it) puts what it starts there: a submitted run, a dispatch. A malformed one is ignored.
	ctx = tracing.Join(ctx, f.Getenv("TRACEPARENT"))
	root := rootFor(f, args)
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
	root.SetErr(f.IO.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	f.AfterWrites(context.WithoutCancel(ctx))
	f.FlushTraces(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	var ue *cmdutil.UsageError
	if !errors.As(err, &ue) && strings.HasPrefix(err.Error(), "unknown command ") {
		// cobra finds an unknown command before any of ours runs; it is a wrong command line.
		// Its message carries its own "Did you mean" block: the suggestion is rendered as a
		// hint instead, like every group's.
		word := ""
		if fields := strings.SplitN(err.Error(), "\"", 3); len(fields) == 3 {
			word = fields[1]
		}
		err = unknownCommand(cmd, word)
	}
	if ctx.Err() != nil {
		return renderInterrupt(f, cmd, err)
	}
	return renderError(f, err)
}

// renderInterrupt says what a Ctrl-C did to the work, instead of "context canceled".
// A command that started work says what became of it ([interruptedError]); a read only
// stopped reading.
func renderInterrupt(f *cmdutil.Factory, cmd *cobra.Command, err error) int {
	var ie *cmdutil.InterruptedError
	switch {
	case errors.As(err, &ie):
		fmt.Fprintf(f.IO.ErrOut, "agora: interrupted: %s\n", ie.What)
	case readOnly(cmd):
		fmt.Fprintf(f.IO.ErrOut, "agora: interrupted: nothing changed\n")
	default:
		fmt.Fprintf(f.IO.ErrOut, "agora: interrupted: %s stopped before it finished (%v); what it had written is committed, see 'agora audit log'\n", cmd.CommandPath(), err)
	}
	return cmdutil.ExitInterrupted
}

// readOnly reports whether cmd only reads: a Ctrl-C cannot have changed anything.
func readOnly(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	switch cmd.Name() {
	case "list", "show", "history", "describe", "logs", "status", "runs", "watch", "validate", "log", "version", "doctor":
		return true
	}
	return false
}

// hinter is implemented by errors that know how to fix themselves.
type hinter interface{ Hint() string }

func renderError(f *cmdutil.Factory, err error) int {
	code := cmdutil.ExitCode(err)
	var ee *cmdutil.ExitCodeError
	if errors.As(err, &ee) && ee.Err == nil {
		return code
	}
	msg := strings.TrimSpace(err.Error())
	for i, line := range strings.Split(msg, "\n") {
		if i == 0 {
			fmt.Fprintf(f.IO.ErrOut, "agora: error: %s\n", line)
		} else {
			fmt.Fprintf(f.IO.ErrOut, "agora:   %s\n", line)
		}
	}
	var h hinter
	if errors.As(err, &h) && h.Hint() != "" {
		fmt.Fprintf(f.IO.ErrOut, "agora: hint: %s\n", h.Hint())
	}
	if ue := (*cmdutil.UsageError)(nil); code == cmdutil.ExitUsage && errors.As(err, &ue) {
		fmt.Fprintf(f.IO.ErrOut, "agora: hint: run '%s' for usage\n", strings.Join(strings.Fields("agora "+ue.CmdPath()+" --help"), " "))
	}
	return code
}

// rootFor builds the command tree args run in (a command pays for its own group only).
// When the first word names one of agora's groups ("dispatch" in `agora dispatch run ...`),
// the root holds that group alone: cobra finds the command in it, and nothing a command of one
// group does looks at another group. Any other command line (none, a flag first, help,
// completion, a word that names no group) gets the whole tree, so the root's help, cobra's
// suggestions and the shell's completion see every command. The completion functions are
// registered only for a shell's completion request (cobra's hidden __complete command).
func rootFor(f *cmdutil.Factory, args []string) *cobra.Command {
	completing := slices.Contains(args, cobra.ShellCompRequestCmd) || slices.Contains(args, cobra.ShellCompNoDescRequestCmd)
	group := ""
	if len(args) > 0 && !completing {
		group = args[0]
	}
	root := newRootCmd(f, group)
	if completing {
		addCompletions(f, root)
	}
	return root
}

// group is one of agora's top-level commands: the word that selects it and how it is made.
type group struct {
	name string
	make func(*cmdutil.Factory) *cobra.Command
}

// groups are agora's top-level commands. A test holds each name to the command it makes.
func groups() []group {
	return []group{
		{"init", func(f *cmdutil.Factory) *cobra.Command { return initcmd.NewCmd(f, nil) }},
		{"capability", capability.NewCmd},
		{"subagent", subagent.NewCmd},
		{"env", env.NewCmd},
		{"workspace", workspace.NewCmd},
		{"apply", func(f *cmdutil.Factory) *cobra.Command { return apply.NewCmd(f, nil) }},
		{"audit", audit.NewCmd},
		{"verify", func(f *cmdutil.Factory) *cobra.Command { return verify.NewCmd(f, nil) }},
		{"dispatch", dispatchcmd.NewCmd},
		{"mcp", func(f *cmdutil.Factory) *cobra.Command { return mcp.NewCmd(f, nil) }},
		{"orch", orch.NewCmd},
		{"gateway", gateway.NewCmd},
		{"doctor", func(f *cmdutil.Factory) *cobra.Command { return doctorcmd.NewCmd(f, doctorProbes(f), nil) }},
		{"selftest", func(f *cmdutil.Factory) *cobra.Command { return selftest.NewCmd(f, nil) }},
		{"restore", func(f *cmdutil.Factory) *cobra.Command { return restore.NewCmd(f, nil) }},
		{"gc", func(f *cmdutil.Factory) *cobra.Command { return gc.NewCmd(f, nil) }},
		{"version", func(f *cmdutil.Factory) *cobra.Command { return version.NewCmd(f, nil) }},
	}
}

// rootLong is the root's help; the whole tree's adds the exit codes.
const rootLong = `agora lets people and AI orchestrators hand work to sandboxed AI sub-agents.

Deploy time (humans and human-reviewed CI only): register the catalog of capabilities,
subagents and env bundles with 'agora capability|subagent|env register' or 'agora apply'.
Run time (anyone, including an AI over MCP): dispatch workers against that catalog.

State lives in AGORA_HOME (default $XDG_DATA_HOME/agora, i.e. ~/.local/share/agora).`

// newRootCmd builds the root with the group named only, or with every group when only is
// not one of them.
func newRootCmd(f *cmdutil.Factory, only string) *cobra.Command {
	root := &cobra.Command{
		Use:           "agora",
		Short:         "Dispatch sandboxed AI sub-agents against a human-provisioned catalog",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
	}
	f.AddActorFlag(root)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &cmdutil.UsageError{Err: err, Cmd: c}
	})
	all := groups()
	if i := slices.IndexFunc(all, func(g group) bool { return g.name == only }); i >= 0 {
		all = all[i : i+1]
	} else {
		// The exit-code table is formatted only where the root's own help can be shown: a
		// tree of one group never resolves to the root.
		root.Long += "\n\n" + cmdutil.ExitCodesHelp()
	}
	for _, g := range all {
		root.AddCommand(g.make(f))
	}
	for _, c := range root.Commands() {
		refuseUnknownSubcommands(c)
	}
	cmdutil.GateHomes(f, root)
	return root
}

// refuseUnknownSubcommands makes a command group (agora dispatch, agora orch ...) show its help
// when called bare, and refuse a word it does not know as a usage error (exit 2). cobra would
// print the help and exit 0, so a typo in a script would look like success.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownCommand(cmd, args[0])
	}
}

// unknownCommandError is a word that names no subcommand of cmd, with cobra's suggestions
// (commands within two edits of it, or that it is a prefix of).
type unknownCommandError struct {
	word, parent string
	suggest      []string
}

func (e *unknownCommandError) Error() string {
	return fmt.Sprintf("unknown command %q for %q", e.word, e.parent)
}

func (e *unknownCommandError) Hint() string {
	if len(e.suggest) == 0 {
		return ""
	}
	return "did you mean " + strings.Join(e.suggest, " or ") + "?"
}

func unknownCommand(cmd *cobra.Command, word string) error {
	e := &unknownCommandError{word: word, parent: cmd.CommandPath()}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	for _, s := range cmd.SuggestionsFor(word) {
		e.suggest = append(e.suggest, "'"+cmd.CommandPath()+" "+s+"'")
	}
	return &cmdutil.UsageError{Err: e, Cmd: cmd}
}
