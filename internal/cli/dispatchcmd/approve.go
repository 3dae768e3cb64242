package dispatchcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
)

// Approving a held call is a person's act at this machine: these commands exist on the CLI
// only. No MCP tool reaches dispatch.Records.DecideApproval (mcpserver's tool set is pinned
// by an exact-set test), so an AI client can never approve its own calls.

type dispatchDecideOptions struct {
	cmdutil.PrintOptions
	call    string
	digest  string
	reason  string
	approve bool
}

func (o *dispatchDecideOptions) Validate(cmd *cobra.Command) error {
	if !o.approve && o.reason == "" {
		return cmdutil.UsageErrorf(cmd, "--reason is required: the model reads it as the tool's result")
	}
	return nil
}

func newDispatchApproveCmd(f *cmdutil.Factory, runF func(*dispatchDecideOptions) error) *cobra.Command {
	opts := &dispatchDecideOptions{PrintOptions: cmdutil.PrintOptions{F: f}, approve: true}
	cmd := cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "approve ID CALL",
		Short: "Let a call held for approval run, with exactly the arguments it was held with",
		Long: `Approve the pending call CALL (its call id, shown by 'agora dispatch describe ID') of
dispatch ID. The approval binds to the digest of the call's arguments: a call with other
arguments is held again. --digest makes sure the arguments are the ones you read; it is
required when the call id was held before with other arguments (the model picks call ids,
and anything in the sandbox can ask for approval under one).
Approval is recorded in the audit log with you (the OS user, or --actor) as the actor.
It is never possible over MCP.`,
		Example: `  agora dispatch approve 01J9Z3K4M5N6P7Q8R9S0T1V2W3 call_abc123
  agora dispatch approve 01J9Z3K4M5N6P7Q8R9S0T1V2W3 toolu_01AB --digest sha256:5f2e... --output json`,
		Args: cmdutil.ExactArgs(2, "ID CALL"),
	}, opts, runF, dispatchDecideRun)
	cmd.Flags().StringVar(&opts.digest, "digest", "", "approve only if the call's arguments have this sha256 digest")
	wrapCallArg(cmd, opts)
	return cmd
}

func newDispatchDenyCmd(f *cmdutil.Factory, runF func(*dispatchDecideOptions) error) *cobra.Command {
	opts := &dispatchDecideOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "deny ID CALL --reason TEXT",
		Short: "Refuse a call held for approval; the model reads the reason",
		Long: `Deny the pending call CALL of dispatch ID. The call does not run; the agent's model
gets the reason as the tool's result. The denial is recorded in the audit log with you as
the actor. It is never possible over MCP.`,
		Example: `  agora dispatch deny 01J9Z3K4M5N6P7Q8R9S0T1V2W3 call_abc123 --reason "do not push to main"`,
		Args:    cmdutil.ExactArgs(2, "ID CALL"),
	}, opts, runF, dispatchDecideRun)
	cmd.Flags().StringVar(&opts.reason, "reason", "", "why (required; the model reads it)")
	cmd.Flags().StringVar(&opts.digest, "digest", "", "deny only the request whose arguments have this sha256 digest")
	wrapCallArg(cmd, opts)
	return cmd
}

// wrapCallArg takes the second argument, CALL, before newPrintCmd's RunE takes the first.
func wrapCallArg(cmd *cobra.Command, opts *dispatchDecideOptions) {
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 2 {
			opts.call = args[1]
		}
		return run(cmd, args)
	}
}

func dispatchDecideRun(ctx context.Context, opts *dispatchDecideOptions) error {
	d, err := openRecords(ctx, opts.F)
	if err != nil {
		return err
	}
	a, err := d.Records.DecideApproval(ctx, opts.Arg, opts.call, opts.approve, opts.reason, opts.F.Actor(), opts.digest)
	if err != nil {
		return err
	}
	return cmdutil.Emit(opts.F.IO, opts.Output, a, func(a *dispatch.Approval) error {
		fmt.Fprintf(opts.F.IO.Out, "%s %s %s %s\n", opts.Arg, a.CallID, a.State, a.ArgsDigest)
		return nil
	})
}

// printApprovals writes a dispatch's held calls for people: the pending first, with what
// to run to decide them.
func printApprovals(w io.Writer, r *dispatch.Record) {
	if r.Phase != "" {
		fmt.Fprintf(w, "phase:     %s\n", r.Phase)
	}
	for _, a := range r.Approvals {
		fmt.Fprintf(w, "approval:  %s %s %s (%s) %s\n", a.CallID, a.Tool, a.State, a.Rule, a.ArgsDigest)
		fmt.Fprintf(w, "  size:    %s\n", argsSize(a.ArgsBytes))
		fmt.Fprintf(w, "  args:    %s\n", cmdutil.AgentText(a.Preview))
		switch {
		case a.State == dispatch.ApprovalPending && r.Phase != "":
			fmt.Fprintf(w, "  read:    agora dispatch approval show %s %s\n", r.ID, a.CallID)
			fmt.Fprintf(w, "  decide:  agora dispatch approve %s %s --digest %s (expires %s)\n", r.ID, a.CallID, a.ArgsDigest, a.ExpiresAt.UTC().Format(time.RFC3339))
			fmt.Fprintf(w, "           agora dispatch deny %s %s --reason TEXT\n", r.ID, a.CallID)
		case a.Actor != "":
			fmt.Fprintf(w, "  by:      %s %s\n", a.Actor, cmdutil.AgentText(a.Reason))
		}
	}
}
