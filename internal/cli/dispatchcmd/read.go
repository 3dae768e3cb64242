package dispatchcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/cli/branch"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/gate"
	"github.com/agora-dev/agora/internal/cli/outdir"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/egress/proxy"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// openRecords reaps dispatches whose supervisor died, then returns the dispatcher.
func openRecords(ctx context.Context, f *cmdutil.Factory) (*dispatch.Dispatcher, error) {
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := d.Reap(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// openRecord reaps, then loads one dispatch record.
func openRecord(ctx context.Context, f *cmdutil.Factory, id string) (*dispatch.Dispatcher, *dispatch.Record, error) {
	d, err := openRecords(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	r, err := d.Records.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return d, r, nil
}

// dispatchIDOptions are the options of a command about one dispatch, whose id is arg.
type dispatchIDOptions struct {
	cmdutil.PrintOptions
}

// dispatchDescribeOptions are describe's: the id, and how long to wait for it to move.
type dispatchDescribeOptions struct {
	cmdutil.PrintOptions
	wait time.Duration
}

func newDispatchDescribeCmd(f *cmdutil.Factory, runF func(*dispatchDescribeOptions) error) *cobra.Command {
	opts := &dispatchDescribeOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "describe ID [--wait DURATION]",
		Short: "Show a dispatch's record and events (works while it runs)",
		Long: `Show a dispatch's record and events. It works while the dispatch runs.

With --wait, describe first waits, up to DURATION, for the dispatch to change state (or phase,
such as a call held for approval) or to end, then shows it: a script follows a long dispatch
with one describe per change. A dispatch that already ended (needs_input included) is shown
at once. Waiting reads the record now and then and holds nothing.`,
		Example: `  agora dispatch describe 01J9Z3K4M5N6P7Q8R9S0T1V2W3 --output json
  agora dispatch describe 01J9Z3K4M5N6P7Q8R9S0T1V2W3 --wait 10m -o json`,
		Args: cmdutil.ExactArgs(1, "ID"),
	}, opts, runF, dispatchDescribeRun)
	cmd.Flags().DurationVar(&opts.wait, "wait", 0, "wait up to this long (e.g. 30s, 10m) for the dispatch to change state or end first")
	return cmd
}

func (o *dispatchDescribeOptions) Validate(cmd *cobra.Command) error {
	if o.wait < 0 {
		return cmdutil.UsageErrorf(cmd, "--wait must not be negative")
	}
	return nil
}

func dispatchDescribeRun(ctx context.Context, opts *dispatchDescribeOptions) error {
	d, r, err := openRecord(ctx, opts.F, opts.Arg)
	if err != nil {
		return err
	}
	if opts.wait > 0 {
		if r, err = waitForChange(ctx, d, r, opts.wait); err != nil {
			return err
		}
	}
	out := describeOutput{Record: r}
	out.Placement, out.PlacementError = placementOf(ctx, d, r)
	return cmdutil.Emit(opts.F.IO, opts.Output, out, func(o describeOutput) error {
		printRecord(opts.F.IO.Out, o.Record)
		if since, ok := d.Orphaned(r); ok {
			fmt.Fprintf(opts.F.IO.Out, "supervisor: gone %s ago; its worker runs on, waiting for agora orch serve to adopt it "+
				"(stopped and recorded lost once %s pass without one)\n", since.Round(time.Second), dispatch.OrphanWait)
		}
		printPlacement(opts.F.IO.Out, o)
		return nil
	})
}

// printRecord writes a dispatch's record and events for people.
func printRecord(w io.Writer, r *dispatch.Record) {
	fmt.Fprintf(w, "id:        %s\n", r.ID)
	fmt.Fprintf(w, "state:     %s\n", r.State)
	if r.Reason != "" {
		fmt.Fprintf(w, "reason:    %s\n", r.Reason)
	}
	if r.Detail != "" {
		fmt.Fprintf(w, "detail:    %s\n", cmdutil.AgentText(r.Detail))
	}
	if r.ExitCode != nil {
		fmt.Fprintf(w, "exit code: %d\n", *r.ExitCode)
	}
	fmt.Fprintf(w, "subagent:  %s@%s\n", r.Subagent, r.SubagentDigest)
	for _, e := range r.Envs {
		fmt.Fprintf(w, "env:       %s@%s\n", e.Name, e.Digest)
	}
	fmt.Fprintf(w, "target:    %s (sandbox %s, network %s, isolation %s)\n", r.Target, r.Sandbox, r.Network, cmdutil.OrDash(r.Isolation))
	if r.Learn {
		fmt.Fprintf(w, "mode:      learn (what the grant would refuse was recorded as *.would_deny, not refused)\n")
	}
	if r.TraceID != "" {
		fmt.Fprintf(w, "trace:     %s\n", r.TraceID)
	}
	if r.Workspace != "" {
		fmt.Fprintf(w, "workspace: %s at %s\n", r.Workspace, r.Revision)
	}
	if r.Repo != "" {
		fmt.Fprintf(w, "repo:      %s@%s\n", r.Repo, r.Revision)
	}
	if r.ParentID != "" {
		fmt.Fprintf(w, "parent:    %s\n", r.ParentID)
	}
	if r.RunID != "" {
		fmt.Fprintf(w, "run:       %s, task %s (an attempt of that task: answer or cancel it through the run)\n", r.RunID, r.TaskID)
	}
	if r.ChildID != "" {
		at := ""
		if r.AnsweredAt != nil {
			at = " at " + r.AnsweredAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "answered:  by %s%s: child %s\n", r.AnsweredBy, at, r.ChildID)
	}
	fmt.Fprintf(w, "input:     %s\n", r.InputDigest)
	fmt.Fprintf(w, "timeout:   %s\n", time.Duration(r.Timeout))
	fmt.Fprintf(w, "actor:     %s\n", r.Actor)
	if g := r.Grants; g != nil {
		fmt.Fprintf(w, "grants:    tools %s; commands %s; egress %s\n", cmdutil.OrNone(g.Tools), cmdutil.OrNone(g.Commands), cmdutil.OrNone(cmdutil.RuleStrings(g.Egress)))
	}
	if b := r.RuntimeBinary; b != nil {
		fmt.Fprintf(w, "runtime:   %s (%s, sha256 %s, bound read-only at %s)\n", b.HostPath, b.Version, b.SHA256, b.Path)
	}
	printNet(w, r.Net)
	if r.Budget != nil {
		fmt.Fprintf(w, "budget:    %s\n", r.Budget)
	}
	if r.Usage != nil {
		fmt.Fprintf(w, "usage:     %s\n", cmdutil.UsageLine(r.Usage, r.Budget))
	}
	printApprovals(w, r)
	if r.Verify != nil {
		gate.Print(w, "verify:    ", r.Verify, r.Verdict, 0)
	}
	if res := r.Result; res != nil {
		if res.Patch != nil {
			fmt.Fprintf(w, "patch:     %s (%d bytes)\n", res.Patch.Digest, res.Patch.Size)
		}
		for _, o := range res.Outputs {
			fmt.Fprintf(w, "output:    %s %s (%d bytes)\n", o.Path, o.Digest, o.Size)
		}
		if res.Transcript != nil {
			fmt.Fprintf(w, "transcript: %s (%d bytes)\n", res.Transcript.Digest, res.Transcript.Size)
		}
		if res.NeedsInput != nil {
			fmt.Fprintf(w, "question:  %s\n", cmdutil.AgentText(res.NeedsInput.Question))
			for _, o := range res.NeedsInput.Options {
				fmt.Fprintf(w, "  option:  %s\n", cmdutil.AgentText(o))
			}
		}
	}
	fmt.Fprintf(w, "events:\n")
	for _, e := range r.Events {
		fmt.Fprintf(w, "  %s  %s\n", e.At.UTC().Format(time.RFC3339Nano), e.Kind)
	}
}

type dispatchListOptions struct {
	cmdutil.PrintOptions
	state string
	limit int
}

func newDispatchListCmd(f *cmdutil.Factory, runF func(*dispatchListOptions) error) *cobra.Command {
	opts := &dispatchListOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := &cobra.Command{
		Use:     "list [--state S]",
		Short:   "List dispatches, newest first",
		Example: `  agora dispatch list --state needs_input --limit 10 --output json`,
		Args:    cmdutil.NoArgs,
	}
	cmd.Flags().StringVar(&opts.state, "state", "", "only dispatches in this state")
	cmd.Flags().IntVar(&opts.limit, "limit", 100, "at most this many")
	return cmdutil.NewPrintCmd(cmd, opts, runF, dispatchListRun)
}

func (o *dispatchListOptions) Validate(cmd *cobra.Command) error {
	if err := dispatch.CheckState(o.state); err != nil {
		return cmdutil.UsageErrorf(cmd, "--state: %v", err)
	}
	return nil
}

func dispatchListRun(ctx context.Context, opts *dispatchListOptions) error {
	f := opts.F
	d, err := openRecords(ctx, f)
	if err != nil {
		return err
	}
	rs, err := d.Records.List(ctx, dispatch.ListFilter{State: opts.state, Limit: opts.limit})
	if err != nil {
		return err
	}
	return cmdutil.Emit(f.IO, opts.Output, rs, func(rs []*dispatch.Record) error {
		rows := make([][]string, len(rs))
		for i, r := range rs {
			sub := r.Subagent
			if r.Learn {
				sub += " (learn)" // what its grant would refuse was recorded, not refused
			}
			rows[i] = []string{r.ID, r.State, cmdutil.OrDash(r.Reason), sub, r.Target, cmdutil.FmtTime(f.IO, f.Now(), r.CreatedAt)}
		}
		return cmdutil.PrintTable(f.IO, []string{"ID", "STATE", "REASON", "SUBAGENT", "TARGET", "CREATED"}, rows)
	})
}

type dispatchLogsOptions struct {
	f                          *cmdutil.Factory
	id                         string
	follow, stderr, transcript bool
}

func newDispatchLogsCmd(f *cmdutil.Factory, runF func(*dispatchLogsOptions) error) *cobra.Command {
	opts := &dispatchLogsOptions{f: f}
	cmd := &cobra.Command{
		Use:   "logs ID [-f]",
		Short: "Print a dispatch's output (capped, secrets redacted)",
		Long: `Print what the worker wrote to stdout (--stderr: to stderr). Output is capped (stdout
4 MiB, stderr 1 MiB) and every secret value of the dispatch's env bundles is redacted,
including its base64, hex and URL-encoded forms. On a terminal, control characters (escape
sequences), bidirectional and invisible characters are shown escaped (\x1b, \u202e); piped
or redirected, the bytes are written as they are. -f follows a running dispatch to its end.
--transcript prints the model runtimes' JSON Lines transcript (openai, claude-code) of a
dispatch that ended, redacted the same way.`,
		Args: cmdutil.ExactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.id = args[0]
			if opts.transcript && (opts.stderr || opts.follow) {
				return cmdutil.UsageErrorf(cmd, "--transcript cannot be used with --stderr or --follow")
			}
			return cmdutil.RunCmd(cmd, opts, runF, dispatchLogsRun)
		},
	}
	cmd.Flags().BoolVarP(&opts.follow, "follow", "f", false, "follow the output until the dispatch ends")
	cmd.Flags().BoolVar(&opts.stderr, "stderr", false, "print the worker's stderr instead of stdout")
	cmd.Flags().BoolVar(&opts.transcript, "transcript", false, "print the model transcript instead of stdout")
	return cmd
}

func dispatchLogsRun(ctx context.Context, opts *dispatchLogsOptions) error {
	f, id := opts.f, opts.id
	d, err := openRecords(ctx, f)
	if err != nil {
		return err
	}
	r, err := d.Records.Get(ctx, id)
	if err != nil {
		return err
	}
	if opts.transcript {
		if r.Result == nil || r.Result.Transcript == nil {
			return fmt.Errorf("dispatch %s has no transcript (only the openai and claude-code runtimes keep one, once the dispatch ends)", id)
		}
		b, err := d.Blobs.Get(r.Result.Transcript.Digest, 0)
		if err != nil {
			return err
		}
		out := cmdutil.AgentOut(f)
		if _, err := out.Write(b); err != nil {
			return err
		}
		return out.Close()
	}
	h, _ := f.Home(ctx)
	name := "stdout.log"
	if opts.stderr {
		name = "stderr.log"
	}
	live := filepath.Join(h.Dir, home.DispatchDir, id, name)
	if lifecycle.DispatchEnded(r.State) {
		return printStoredLog(f, d, r, opts.stderr, live)
	}
	return followLog(ctx, f, d, id, live, opts.follow, opts.stderr)
}

func printStoredLog(f *cmdutil.Factory, d *dispatch.Dispatcher, r *dispatch.Record, stderr bool, live string) error {
	var a *dispatch.Artifact
	if r.Result != nil {
		a = r.Result.Stdout
		if stderr {
			a = r.Result.Stderr
		}
	}
	if a == nil {
		// Ended before the worker ran (denied, fetch-failed): there is no output.
		return nil
	}
	b, err := d.Blobs.Get(a.Digest, 0)
	if err != nil {
		return err
	}
	out := cmdutil.AgentOut(f)
	if _, err := out.Write(b); err != nil {
		return err
	}
	return out.Close()
}

// followLog copies the live log file, and with follow keeps copying until the dispatch ends.
func followLog(ctx context.Context, f *cmdutil.Factory, d *dispatch.Dispatcher, id, path string, follow, stderr bool) error {
	var off int64
	out := cmdutil.AgentOut(f)
	defer out.Close()
	for {
		if fh, err := os.Open(path); err == nil {
			fh.Seek(off, io.SeekStart)
			n, _ := io.Copy(out, fh)
			off += n
			fh.Close()
		}
		if !follow {
			return nil
		}
		r, err := d.Records.Get(ctx, id)
		if err != nil {
			return err
		}
		if lifecycle.DispatchEnded(r.State) {
			// The live file is complete once the record is terminal; copy its tail.
			if fh, err := os.Open(path); err == nil {
				fh.Seek(off, io.SeekStart)
				io.Copy(out, fh)
				fh.Close()
			}
			return out.Close()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type dispatchPatchOptions struct {
	f            *cmdutil.Factory
	id           string
	branch, repo string
	// includeLearn lets a learn dispatch's patch become a branch (docs/learn.md).
	includeLearn bool
}

func newDispatchPatchCmd(f *cmdutil.Factory, runF func(*dispatchPatchOptions) error) *cobra.Command {
	opts := &dispatchPatchOptions{f: f}
	cmd := &cobra.Command{
		Use:   "patch ID [--branch NAME [--repo PATH]]",
		Short: "Print a dispatch's patch, ready for git apply, or make it a branch",
		Long: `Print the patch the worker captured (git diff --binary against the workspace as it was
before the agent ran). It applies with 'git apply' on the dispatch's revision. Review it: the
agent wrote it.

--branch NAME instead creates branch NAME in the dispatch's repository (its --repo, or its
workspace's repository; --repo PATH names another clone that has its commit) with one commit
on the commit the dispatch ran on: author the subagent and its digest
(name@sha256:HEX <name@subagent.agora.invalid>), committer agora <agora@agora.invalid>,
Agora-Dispatch and Agora-Subagent trailers in the message. Only git's object store and the
new branch are written: no checkout, no index, no HEAD, no push, and no hook, fsmonitor or
configured driver runs. An existing branch is refused, never moved.`,
		Example: `  agora dispatch patch 01J9Z3K4M5N6P7Q8R9S0T1V2W3 | git apply --check
  agora dispatch patch 01J9Z3K4M5N6P7Q8R9S0T1V2W3 --branch agora/fix-login
  git log -1 --stat agora/fix-login
  agora dispatch patch 01J9Z3K4M5N6P7Q8R9S0T1V2W3 --branch agora/fix-login --repo ~/src/app-clone`,
		Args: cmdutil.ExactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.id = args[0]
			if opts.repo != "" && opts.branch == "" {
				return cmdutil.UsageErrorf(cmd, "--repo goes with --branch")
			}
			return cmdutil.RunCmd(cmd, opts, runF, dispatchPatchRun)
		},
	}
	cmd.Flags().StringVar(&opts.branch, "branch", "", "create this git branch with the patch as one commit")
	cmd.Flags().StringVar(&opts.repo, "repo", "", "the repository for --branch (default: the dispatch's)")
	cmd.Flags().BoolVar(&opts.includeLearn, "include-learn", false, "make a learn dispatch's patch a branch (refused without it: docs/learn.md)")
	return cmd
}

func dispatchPatchRun(ctx context.Context, opts *dispatchPatchOptions) error {
	d, r, err := openRecord(ctx, opts.f, opts.id)
	if err != nil {
		return err
	}
	if !lifecycle.DispatchEnded(r.State) {
		return fmt.Errorf("dispatch %s is still %s; its patch exists once it ends", r.ID, r.State)
	}
	if r.Result == nil || r.Result.Patch == nil {
		return fmt.Errorf("dispatch %s has no patch (%s)", r.ID, strings.Join(nonEmpty(r.State, r.Reason), ": "))
	}
	if opts.branch != "" {
		if !opts.includeLearn {
			if err := dispatch.LearnRefusal(r, "a branch"); err != nil {
				return err
			}
		}
		w, err := branch.DispatchWork(d.Blobs, r, opts.repo)
		if err != nil {
			return err
		}
		return branch.Write(ctx, opts.f, w, opts.branch)
	}
	b, err := d.Blobs.Get(r.Result.Patch.Digest, 0)
	if err != nil {
		return err
	}
	_, err = opts.f.IO.Out.Write(b)
	return err
}

type dispatchOutputsOptions struct {
	f      *cmdutil.Factory
	id     string
	to     string
	output string
}

func newDispatchOutputsCmd(f *cmdutil.Factory, runF func(*dispatchOutputsOptions) error) *cobra.Command {
	opts := &dispatchOutputsOptions{f: f}
	cmd := &cobra.Command{
		Use:   "outputs ID --to DIR",
		Short: "Write a dispatch's output files into a directory",
		Long: `Write the files the agent left in outputs/ to DIR/<path>. Review them: the agent
wrote them.

Files are written 0600 (new directories 0700). Nothing already in DIR is followed or
overwritten: a symbolic link, or a different file, where an output goes is an error, and a
file with the same content is left as it is, so a rerun succeeds.`,
		Example: `  agora dispatch outputs 01J9Z3K4M5N6P7Q8R9S0T1V2W3 --to ./review`,
		Args:    cmdutil.ExactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.id = args[0]
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, dispatchOutputsRun)
		},
	}
	cmd.Flags().StringVar(&opts.to, "to", "", "directory to write the files into (created if needed)")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func dispatchOutputsRun(ctx context.Context, opts *dispatchOutputsOptions) error {
	f := opts.f
	d, r, err := openRecord(ctx, f, opts.id)
	if err != nil {
		return err
	}
	outs := []dispatch.Output{}
	if r.Result != nil {
		outs = r.Result.Outputs
	}
	if opts.output == cmdutil.FormatJSON && opts.to == "" {
		return cmdutil.WriteJSON(f.IO.Out, outs)
	}
	if opts.to == "" {
		return &cmdutil.UsageError{Err: errors.New("--to DIR is required")}
	}
	if len(outs) > 0 {
		dir, err := outdir.Open(opts.to)
		if err != nil {
			return err
		}
		defer dir.Close()
		for _, o := range outs {
			path, err := writeOutput(d, dir, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "agora: wrote %s\n", path)
		}
	}
	if opts.output == cmdutil.FormatJSON {
		return cmdutil.WriteJSON(f.IO.Out, outs)
	}
	if len(outs) == 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: dispatch %s has no outputs\n", r.ID)
	}
	return nil
}

// writeOutput writes one output below dir (see writeout.go: no link followed, nothing
// overwritten, 0600) and returns the path written. Output paths are the agent's: one that
// would leave dir is refused.
func writeOutput(d *dispatch.Dispatcher, dir *outdir.Dir, o dispatch.Output) (string, error) {
	b, err := d.Blobs.Get(o.Digest, 0)
	if err != nil {
		return "", err
	}
	return dir.WriteFile(o.Path, b)
}

func newDispatchCancelCmd(f *cmdutil.Factory, runF func(*dispatchIDOptions) error) *cobra.Command {
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:     "cancel ID",
		Short:   "Stop a running dispatch and everything it started (idempotent)",
		Example: `  agora dispatch cancel 01J9Z3K4M5N6P7Q8R9S0T1V2W3 --output json`,
		Args:    cmdutil.ExactArgs(1, "ID"),
	}, &dispatchIDOptions{cmdutil.PrintOptions{F: f}}, runF, dispatchCancelRun)
}

func dispatchCancelRun(ctx context.Context, opts *dispatchIDOptions) error {
	d, err := openRecords(ctx, opts.F)
	if err != nil {
		return err
	}
	r, err := d.Cancel(ctx, opts.Arg)
	if err != nil {
		return err
	}
	return cmdutil.Emit(opts.F.IO, opts.Output, r, func(r *dispatch.Record) error {
		fmt.Fprintf(opts.F.IO.Out, "%s %s\n", r.ID, r.State)
		return nil
	})
}

type dispatchResumeOptions struct {
	f      *cmdutil.Factory
	id     string
	answer string
	detach bool
	output string
}

func newDispatchResumeCmd(f *cmdutil.Factory, runF func(*dispatchResumeOptions) error) *cobra.Command {
	opts := &dispatchResumeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "resume ID --answer TEXT",
		Short: "Answer a dispatch that needs input, as a new linked dispatch",
		Long: `Start a new dispatch, linked to ID as its parent, with the same pinned subagent, env
bundles, target and revision. Its input is the parent's input plus "agora_resume":
{"question", "answer", "partial_state"}, so the agent can pick up where it stopped.

A question is answered once: the parent moves to state answered and names its child, in
the same transaction that records the child, and a later answer (from here or over MCP)
is refused naming the first (who, when, which child). A run's attempt is answered through
its run: 'agora orch answer RUN TASK --answer TEXT'.`,
		Args: cmdutil.ExactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.id = args[0]
			if opts.answer == "" {
				return cmdutil.UsageErrorf(cmd, "--answer is required")
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, dispatchResumeRun)
		},
	}
	cmd.Flags().StringVar(&opts.answer, "answer", "", "the answer to the dispatch's question (required)")
	cmd.Flags().BoolVar(&opts.detach, "detach", false, "return once the worker has started")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func dispatchResumeRun(ctx context.Context, opts *dispatchResumeOptions) error {
	d, parent, err := openRecord(ctx, opts.f, opts.id)
	if err != nil {
		return err
	}
	req, err := d.ResumeRequest(ctx, parent, opts.answer, dispatch.Answerer{Actor: opts.f.Actor(), Via: dispatch.ViaCLI})
	var re *dispatch.RequestError
	if errors.As(err, &re) {
		// A refused answer exits as runDispatch's refusals do, whichever check caught it
		// (this one, or the transaction that records the child when another answer won).
		return &cmdutil.UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	return runDispatch(ctx, opts.f, req, opts.detach, opts.output, opts.f.IO.ErrTTY)
}

// printNet writes what the dispatch's egress proxy saw: hosts reached and refused, with
// their connection counts, and the bytes each way.
func printNet(w io.Writer, n *proxy.Stats) {
	if n == nil {
		return
	}
	counts := func(m map[string]int) string {
		if len(m) == 0 {
			return "none"
		}
		keys := slices.Sorted(maps.Keys(m))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s (%d)", cmdutil.AgentText(k), m[k])
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "reached:   %s; %d bytes up, %d down\n", counts(n.Reached), n.BytesUp, n.BytesDown)
	fmt.Fprintf(w, "refused:   %s\n", counts(n.Refused))
}
