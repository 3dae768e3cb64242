package dispatchcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/modelgw"
)

// Reading a held call before deciding it: 'agora dispatch approval list ID' shows every
// call of a dispatch held for approval with its preview, and 'agora dispatch approval show
// ID CALL' prints a pending call's whole arguments (a preview cut at
// 2 KiB is not enough to approve a call by).

func newDispatchApprovalCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approval",
		Short: "List a dispatch's calls held for approval and read their whole arguments",
		Long: `A call a capability marks for approval waits until a person decides it with
'agora dispatch approve' or 'agora dispatch deny'. These commands show what is waiting:
'list' every held call of a dispatch with its preview (the fields that say what the call
acts on first and whole, cut at 2 KiB with '[… N more bytes not shown]' markers), 'show'
the whole arguments of a call while it is pending. Secrets of the dispatch are masked and
characters a terminal would not show as themselves are escaped (\uXXXX).`,
	}
	cmd.AddCommand(newDispatchApprovalListCmd(f, nil), newDispatchApprovalShowCmd(f, nil))
	return cmd
}

type dispatchApprovalListOptions struct {
	cmdutil.PrintOptions
}

func newDispatchApprovalListCmd(f *cmdutil.Factory, runF func(*dispatchApprovalListOptions) error) *cobra.Command {
	opts := &dispatchApprovalListOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "list ID",
		Short: "Show every call of a dispatch held for approval, with its preview and size",
		Long: `List the calls of dispatch ID held for a person's approval, pending or decided: the
call id, tool, state, the approve rule of the grant that holds it, the digest of its
arguments, their size and a preview. A preview shows the fields that say what the call acts
on (path, argv, url, method...) first and whole; a cut ends with '[… N more bytes not
shown]' and the command that prints everything. A literal '…' in a preview is always such a
marker: the same character in the arguments is shown as \u2026.`,
		Example: `  agora dispatch approval list 01J9Z3K4M5N6P7Q8R9S0T1V2W3
  agora dispatch approval list 01J9Z3K4M5N6P7Q8R9S0T1V2W3 --output json`,
		Args: cmdutil.ExactArgs(1, "ID"),
	}, opts, runF, dispatchApprovalListRun)
}

func dispatchApprovalListRun(ctx context.Context, opts *dispatchApprovalListOptions) error {
	_, r, err := openRecord(ctx, opts.F, opts.Arg)
	if err != nil {
		return err
	}
	list := append([]dispatch.Approval{}, r.Approvals...)
	return cmdutil.Emit(opts.F.IO, opts.Output, list, func([]dispatch.Approval) error {
		if len(list) == 0 {
			fmt.Fprintf(opts.F.IO.ErrOut, "dispatch %s has no call held for approval\n", r.ID)
			return nil
		}
		printApprovals(opts.F.IO.Out, r)
		return nil
	})
}

type dispatchApprovalShowOptions struct {
	cmdutil.PrintOptions
	call   string
	digest string
}

func newDispatchApprovalShowCmd(f *cmdutil.Factory, runF func(*dispatchApprovalShowOptions) error) *cobra.Command {
	opts := &dispatchApprovalShowOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "show ID CALL",
		Short: "Print the whole arguments of a call held for approval",
		Long: `Print call CALL of dispatch ID as it waits for approval: its tool, rule, digest and
size, then every field of its arguments, the identifying ones first. A string with line
breaks is printed as a block, each line of it after '  | ', so that no line of content can
pass for a field. Secrets of the dispatch are masked; control, format and bidirectional
characters are escaped (\uXXXX). The whole arguments are kept while the call is pending;
a decided or expired call shows its preview. --digest picks one of several requests under
the same call id. With --output json, args is the arguments object, escaped the same way.`,
		Example: `  agora dispatch approval show 01J9Z3K4M5N6P7Q8R9S0T1V2W3 call_abc123
  agora dispatch approval show 01J9Z3K4M5N6P7Q8R9S0T1V2W3 toolu_01AB --output json`,
		Args: cmdutil.ExactArgs(2, "ID CALL"),
	}, opts, runF, dispatchApprovalShowRun)
	cmd.Flags().StringVar(&opts.digest, "digest", "", "show only the request whose arguments have this sha256 digest")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 2 {
			opts.call = args[1]
		}
		return run(cmd, args)
	}
	return cmd
}

// heldCall is one request of 'approval show --output json': the approval and its whole
// arguments (null once it is no longer pending).
type heldCall struct {
	Dispatch string `json:"dispatch"`
	dispatch.Approval
	Args json.RawMessage `json:"args"`
	raw  string          // the stored arguments, "" once not pending
}

func dispatchApprovalShowRun(ctx context.Context, opts *dispatchApprovalShowOptions) error {
	d, r, err := openRecord(ctx, opts.F, opts.Arg)
	if err != nil {
		return err
	}
	calls := []heldCall{}
	for _, a := range r.Approvals {
		if a.CallID != opts.call || opts.digest != "" && a.ArgsDigest != opts.digest {
			continue
		}
		args, err := d.Records.ApprovalArgs(ctx, r.ID, a.Seq)
		if err != nil {
			return err
		}
		calls = append(calls, heldCall{Dispatch: r.ID, Approval: a, Args: argsJSON(args), raw: args})
	}
	if len(calls) == 0 {
		var known []string
		for _, a := range r.Approvals {
			known = append(known, a.CallID+" ("+a.Tool+", "+a.State+")")
		}
		what := fmt.Sprintf("call %q", opts.call)
		if opts.digest != "" {
			what += " with arguments " + opts.digest
		}
		if len(known) == 0 {
			return fmt.Errorf("dispatch %s has no %s held for approval; it has none", r.ID, what)
		}
		return fmt.Errorf("dispatch %s has no %s held for approval; held: %s", r.ID, what, strings.Join(known, ", "))
	}
	return cmdutil.Emit(opts.F.IO, opts.Output, calls, func([]heldCall) error {
		for i, c := range calls {
			if i > 0 {
				fmt.Fprintln(opts.F.IO.Out)
			}
			printHeldCall(opts.F.IO.Out, r, c)
		}
		return nil
	})
}

// argsJSON is a call's stored arguments for JSON output: the object escaped with
// [modelgw.EscapeJSON] (the same value to a JSON reader, safe on a terminal), a JSON string
// when masking left something that is not JSON, null when none are kept.
func argsJSON(args string) json.RawMessage {
	if args == "" {
		return json.RawMessage("null")
	}
	if esc := modelgw.EscapeJSON(args); json.Valid([]byte(esc)) {
		return json.RawMessage(esc)
	}
	b, _ := json.Marshal(args)
	return json.RawMessage(modelgw.EscapeJSON(string(b)))
}

// printHeldCall writes one held call for a person: what it is, how to decide it, and every
// field of its arguments while it is pending.
func printHeldCall(w io.Writer, r *dispatch.Record, c heldCall) {
	a := c.Approval
	fmt.Fprintf(w, "dispatch:  %s\n", r.ID)
	fmt.Fprintf(w, "call:      %s\n", a.CallID)
	fmt.Fprintf(w, "tool:      %s\n", a.Tool)
	fmt.Fprintf(w, "rule:      %s\n", a.Rule)
	fmt.Fprintf(w, "state:     %s\n", a.State)
	fmt.Fprintf(w, "digest:    %s\n", a.ArgsDigest)
	fmt.Fprintf(w, "size:      %s\n", argsSize(a.ArgsBytes))
	switch {
	case a.State == dispatch.ApprovalPending && r.Phase != "":
		fmt.Fprintf(w, "decide:    agora dispatch approve %s %s --digest %s (expires %s)\n", r.ID, a.CallID, a.ArgsDigest, a.ExpiresAt.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "           agora dispatch deny %s %s --reason TEXT\n", r.ID, a.CallID)
	case a.Actor != "":
		fmt.Fprintf(w, "by:        %s %s\n", a.Actor, cmdutil.AgentText(a.Reason))
	}
	if c.raw == "" {
		fmt.Fprintf(w, "args:      %s\n", cmdutil.AgentText(a.Preview))
		fmt.Fprintln(w, "           (the preview: the whole arguments are kept only while the call is pending)")
		return
	}
	fmt.Fprintln(w, "args:")
	for _, l := range strings.SplitAfter(modelgw.FormatArgs(c.raw), "\n") {
		if l != "" {
			fmt.Fprint(w, "  "+l)
		}
	}
}

// argsSize is the size of a call's arguments for people: "2,431 bytes", or "unknown" for a
// call held before sizes were recorded.
func argsSize(n int) string {
	if n <= 0 {
		return "unknown"
	}
	return modelgw.Thousands(n) + " bytes"
}
