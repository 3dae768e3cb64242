// Package dispatchcmd is `agora dispatch`: run and resume a dispatch, read its record, logs,
// patch and outputs, decide its held calls, supervise it detached or as a warm standby, and
// the resident dispatcher. The hand-off is both ways here: the CLI's side gives a dispatch
// to a running serve or resident (handoff.go), and serve's side runs it as this command
// would ([NewHandoffRunner], which the composition root hands serve through the factory).
package dispatchcmd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/gate"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/lease/fencefile"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// NewCmd returns agora dispatch and its verbs.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dispatch",
		Short: "Run sandboxed workers and read their records, patches and outputs",
		Long: `A dispatch runs one subagent on one target in a sandbox. Its record is written before
anything starts and ends in exactly one terminal state: finished, needs_input, failed (with a
reason: worker-failed, provider-failed, timeout, cancelled, fetch-failed, integrity-failed,
denied, lost, limit-exceeded, budget-exceeded, gateway-unreachable, verify-failed) or cancelled. lost means the
process supervising the worker died first; the worker died with it. gateway-unreachable means a
kubernetes target's pod could not reach agora's network gateway across its retries (the
gateway was down longer than the pod waits for it): the agent is not to blame. integrity-failed after the run means the out directory did not
hold what the worker declared (nothing of it is kept). limit-exceeded means the host stopped
the sandbox at a limit it enforces (the disk quota, the audit budget). budget-exceeded means
the dispatch's budget (tokens, usd or model calls: the subagent's and the target's, narrowed by
--budget-*) was spent and the gateway refused the next model call. verify-failed means the
agent finished but its verify gate (--verify, a plan's verify:) was red: the verdict says why.

Exit codes of run and resume:
  0  finished
  1  infrastructure failure (provider-failed, fetch-failed, lost, gateway-unreachable, or
     agora itself)
  2  usage error: nothing was dispatched
  3  the worker did not succeed (worker-failed, timeout, denied, integrity-failed,
     limit-exceeded, budget-exceeded, verify-failed, cancelled)
  4  needs input: answer with 'agora dispatch resume ID --answer TEXT'`,
	}
	cmd.AddCommand(
		newDispatchRunCmd(f, nil),
		newDispatchResumeCmd(f, nil),
		newDispatchDescribeCmd(f, nil),
		newDispatchListCmd(f, nil),
		newDispatchLogsCmd(f, nil),
		newDispatchPatchCmd(f, nil),
		newDispatchOutputsCmd(f, nil),
		newDispatchCancelCmd(f, nil),
		newDispatchApproveCmd(f, nil),
		newDispatchDenyCmd(f, nil),
		newDispatchApprovalCmd(f),
		newDispatchDeliverCmd(f, nil),
		newDispatchSuperviseCmd(f, nil),
		newDispatchResidentCmd(f, nil),
	)
	return cmd
}

type dispatchRunOptions struct {
	f   *cmdutil.Factory
	req dispatch.Request

	subagent string
	envs     []string
	target   string
	input    string
	repo     string
	wsFlag   string
	timeout  time.Duration
	detach   bool
	callback string
	output   string
	progress bool
	// tools, commands and egress narrow the subagent's grant when their flag is given.
	tools, commands, egress []string
	// budget narrows the subagent's and the target's budgets (--budget-*).
	budget budget.Budget
	// verify is the dispatch's verify gate (--verify, --verify-timeout, --protect).
	verify gate.Flags
	// learn makes it a learn dispatch (--learn; docs/learn.md).
	learn bool
	// inProcess keeps the dispatch in this process even when a serve runs (--in-process).
	inProcess bool
	// notUTF8 is set when a flag's value is not UTF-8: the hand-off's JSON would carry it
	// changed (U+FFFD), so serve would judge another name or path.
	notUTF8 bool
}

// grants returns the narrowing the flags ask for, or nil when none was given: a kind whose
// flag is absent stays as the subagent has it; a flag given an empty value grants none of it.
func (o *dispatchRunOptions) grants(cmd *cobra.Command) (*grant.Set, error) {
	fl := cmd.Flags()
	if !fl.Changed("tools") && !fl.Changed("commands") && !fl.Changed("egress") {
		return nil, nil
	}
	g := &grant.Set{}
	if fl.Changed("tools") {
		g.Tools = append([]string{}, cmdutil.SplitList(o.tools)...)
	}
	if fl.Changed("commands") {
		g.Commands = []string{}
		for _, c := range o.commands {
			if c = strings.TrimSpace(c); c != "" {
				g.Commands = append(g.Commands, c)
			}
		}
	}
	if fl.Changed("egress") {
		g.Egress = []grant.EgressRule{}
		for _, s := range cmdutil.SplitList(o.egress) {
			r, err := grant.ParseEgressRule(strings.ToLower(s))
			if err != nil {
				return nil, cmdutil.UsageErrorf(cmd, "--egress: %v", err)
			}
			g.Egress = append(g.Egress, r)
		}
	}
	return g, nil
}

// dispatchRunLong is `agora dispatch run --help`'s description.
const dispatchRunLong = `Dispatch a subagent on a target (default: local, bubblewrap on this machine).

The dispatch id is printed at once; lifecycle events go to stderr as they happen, and a
summary follows the end. With --detach, run returns once the worker has started.

The worker sees: the workspace (a checkout of --workspace or --repo at its revision, or an
empty directory) with the subagent's capability files overlaid, the env bundles' values and secrets (secrets
arrive on a file descriptor, never in argv), AGORA_INPUT_JSON and AGORA_DISPATCH_ID. Its
changes come back as a patch: 'agora dispatch patch ID | git apply'.

--tools, --commands and --egress narrow what the worker is granted (see 'agora subagent show'):
each one given replaces that part of the subagent's grant with a subset of it ('' for none);
anything the subagent's capabilities do not grant is refused. --budget-tokens, --budget-usd and
--budget-calls narrow the subagent's and the target's budgets (never raise them: a higher value
is refused naming the ceiling); once spent, the next model call is refused and the dispatch ends
failed/budget-exceeded. The openai and claude-code
runtimes reach their model through a gateway on the host that holds the API key (OPENAI_API_KEY
or ANTHROPIC_API_KEY from the env bundles); the sandbox never sees it. See docs/runtimes.md.

--verify CMD is a verify gate: after the agent, agora checks its work itself. A patch touching
a --protect glob, or with --changes any path outside them (added, removed, renamed, re-moded,
a link leaving them, a submodule), is red at once, naming the paths; name what the work may
change with --changes, since any new file can change what CMD runs (a unittest/__main__.py,
a conftest.py, a GNUmakefile). Otherwise CMD (one simple command, split as sh would, no
shell) runs in a fresh sandbox of the target on the base tree plus the patch, with no model
key, no env bundle values or secrets and no network. The verdict is the exit status and the
end of the output agora read from that sandbox (the last 16 KiB, redacted, hashed), shown in
the summary and 'agora dispatch describe'; with --expect-junit NAME, exit 0 is green only
when CMD wrote the JUnit report $AGORA_REPORT/NAME showing its tests ran and passed. Red ends
the dispatch failed/verify-failed (exit 3) with the patch kept. See docs/plan.md, "Verify
gates".

--learn runs a learn dispatch: what the grant would refuse (tools, commands, hosts with their
methods and paths) is recorded as a would_deny audit entry instead of refused, inside the same
sandbox. No host file, no agora state, no host outside egress.learn_hosts (agora.yaml; empty by
default), no secret's value and no budget or limit is opened. The dispatch is marked learn
everywhere it is shown, and its patch feeds no plan hand-off or branch without --include-learn.
'agora audit log --kind tool.would_deny' (and net.would_deny) shows what it learned. See docs/learn.md.

When 'agora orch serve' runs on the same AGORA_HOME, run hands the dispatch to it over its
socket: serve supervises it on its resident path and the output, exit code and Ctrl-C are the
same. --in-process (or AGORA_NO_HANDOFF=1) keeps it in this process; so do --actor, TRACEPARENT
and a relative --repo. See docs/operations.md, "agora dispatch run hands its dispatch to a
running serve".`

func newDispatchRunCmd(f *cmdutil.Factory, runF func(*dispatchRunOptions) error) *cobra.Command {
	opts := &dispatchRunOptions{f: f}
	cmd := &cobra.Command{
		Use:   "run --subagent NAME[@sha256:HEX] [flags]",
		Short: "Dispatch a subagent in a sandbox and wait for it",
		Long:  dispatchRunLong,
		Example: `  agora dispatch run --subagent hello --env demo --repo . --input '{"task":"greet"}'
  agora dispatch run --subagent fixer@sha256:1f2e... --repo ~/src/app@v1.2.0 --timeout 10m --detach
  agora dispatch run --subagent fixer --workspace app@release/1
  agora dispatch run --subagent reviewer --env model --repo . --tools read_file,run_command --commands 'git diff *' --input '{"prompt":"review the last commit"}'
  agora dispatch run --subagent fixer --repo . --verify 'go test ./...' --protect '**/*_test.go' --protect '.github/**'
  agora dispatch run --subagent fixer --repo . --learn`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.subagent == "" {
				return cmdutil.UsageErrorf(cmd, "--subagent is required")
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			input, err := readInput(opts.input)
			if err != nil {
				return cmdutil.UsageErrorf(cmd, "--input: %v", err)
			}
			if opts.repo != "" && opts.wsFlag != "" {
				return cmdutil.UsageErrorf(cmd, "--repo and --workspace cannot both be given: name a workspace or a repository")
			}
			repo, rev := cmdutil.SplitRepo(opts.repo)
			ws := ""
			if opts.wsFlag != "" {
				ws, rev = cmdutil.SplitWorkspace(opts.wsFlag)
			}
			grants, err := opts.grants(cmd)
			if err != nil {
				return err
			}
			if err := opts.budget.Validate(); err != nil {
				return cmdutil.UsageErrorf(cmd, "%v", err)
			}
			spec, err := opts.verify.Spec(cmd)
			if err != nil {
				return err
			}
			cmd.Flags().Visit(func(fl *pflag.Flag) {
				if !utf8.ValidString(fl.Value.String()) {
					opts.notUTF8 = true
				}
			})
			opts.req = dispatch.Request{
				Subagent: opts.subagent, Envs: cmdutil.SplitList(opts.envs), Target: opts.target, Input: input,
				Repo: repo, Workspace: ws, Revision: rev, Timeout: opts.timeout, Actor: f.Actor(), CallbackURL: opts.callback,
				Grants: grants, Budget: opts.budget, Verify: spec, Learn: opts.learn,
			}
			return cmdutil.RunCmd(cmd, opts, runF, dispatchRunRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.subagent, "subagent", "", "the subagent to run: NAME (latest) or NAME@sha256:HEX (required)")
	fl.StringSliceVar(&opts.envs, "env", nil, "env bundles, comma-separated or repeated; a later bundle's key wins")
	fl.StringVar(&opts.target, "target", "", "target from agora.yaml (default local)")
	fl.StringVar(&opts.input, "input", "", "input as a JSON object, or @FILE to read it from a file; at most 120 KiB as canonical JSON")
	fl.StringVar(&opts.repo, "repo", "", "git repository to work on: PATH or PATH@REV (default HEAD)")
	fl.StringVar(&opts.wsFlag, "workspace", "", "workspace to work on: NAME or NAME@REV, a branch, tag or commit it allows (default: its default revision)")
	fl.DurationVar(&opts.timeout, "timeout", 0, "wall-clock limit (default and maximum: the target's)")
	fl.BoolVar(&opts.detach, "detach", false, "return once the worker has started")
	fl.StringVar(&opts.callback, "callback", "", "URL that receives every lifecycle event as a signed POST")
	fl.StringSliceVar(&opts.tools, "tools", nil, "narrow the granted tools to these, comma-separated ('' for none)")
	fl.StringArrayVar(&opts.commands, "commands", nil, "narrow the granted command patterns to these, one per flag ('' for none)")
	fl.StringSliceVar(&opts.egress, "egress", nil, "narrow the granted egress hosts to these, comma-separated ('' for none)")
	fl.Int64Var(&opts.budget.Tokens, "budget-tokens", 0, "narrow the token budget (input plus output) to at most this")
	fl.Float64Var(&opts.budget.USD, "budget-usd", 0, "narrow the cost budget to at most this many US dollars (needs the model's price in agora.yaml)")
	fl.Int64Var(&opts.budget.ModelCalls, "budget-calls", 0, "narrow the model call budget to at most this many calls")
	opts.verify.Add(cmd)
	fl.BoolVar(&opts.learn, "learn", false, "record what the grant would refuse (*.would_deny) instead of refusing it, inside the same sandbox (docs/learn.md)")
	fl.BoolVar(&opts.inProcess, "in-process", false, "supervise the dispatch in this process even when 'agora orch serve' runs (also "+envNoHandoff+"=1)")
	fl.BoolVar(&opts.progress, "progress", false, "show each phase and the worker's last output line on stderr (default: when stderr is a terminal)")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func dispatchRunRun(ctx context.Context, opts *dispatchRunOptions) error {
	if id := opts.f.Getenv(envHandoffLost); id != "" {
		return followLost(ctx, opts, id)
	}
	if err := handoff(ctx, opts); !errors.Is(err, errNoHandoff) {
		return err
	}
	err := runDispatch(ctx, opts.f, opts.req, opts.detach, opts.output, opts.progress || opts.f.IO.ErrTTY)
	// After the dispatch, not before: the resident's start (its own Go start, agora.db, warm
	// slots staged) would share this machine's cores with the dispatch the user waits for.
	if ctx.Err() == nil {
		startResident(ctx, opts)
	}
	return err
}

func readInput(s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if path, ok := strings.CutPrefix(s, "@"); ok {
		b, err := cmdutil.ReadLimited(path, 1<<20)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return json.RawMessage(s), nil
}

// runDispatch accepts req and supervises it here, or in a detached process.
func runDispatch(ctx context.Context, f *cmdutil.Factory, req dispatch.Request, detached bool, output string, show bool) error {
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return err
	}
	return runDispatchWith(ctx, f, d, nil, req, detached, output, show, nil)
}

// runDispatchWith is runDispatch over d: the one-shot CLI's own dispatcher, or serve's for a
// dispatch the CLI handed to it (runner.go; f's streams are then the hand-off's frames,
// and sup serve's supervisors, whose standbys hold its warm slots; nil: d's own).
// accepted, when not nil, is told the dispatch's id once it is accepted.
func runDispatchWith(ctx context.Context, f *cmdutil.Factory, d *dispatch.Dispatcher, sup *detach.Supervisors, req dispatch.Request, detached bool, output string, show bool, accepted func(string)) error {
	if sup == nil {
		sup = detach.For(d)
	}
	// Dispatches whose supervisor died are ended before this one is accepted: at once in the
	// one-shot CLI (its Supervisors are new), at most once per detach.ReapEvery in serve,
	// whose hand-offs would otherwise each pay for the scan (0.3 ms of a 14 ms no-op),
	// as mcphost's dispatches do.
	if err := sup.Reap(ctx); err != nil {
		return err
	}
	if t, err := d.Config.Target(req.Target); err == nil {
		if t.Sandbox == "none" {
			fmt.Fprintf(f.IO.ErrOut, "agora: WARNING: target %q runs workers WITHOUT a sandbox (sandbox: none); this is recorded on the dispatch\n", cmp.Or(req.Target, "local"))
		}
		if t.Network == dispatch.NetworkHost {
			fmt.Fprintf(f.IO.ErrOut, "agora: WARNING: target %q gives workers the host's network, unrestricted and unaudited (network: host); this is recorded on the dispatch\n", cmp.Or(req.Target, "local"))
		}
	}
	rec, err := d.Accept(ctx, req)
	var re *dispatch.RequestError
	if errors.As(err, &re) {
		return &cmdutil.UsageError{Err: err}
	}
	if err != nil {
		return err
	}
	if accepted != nil {
		accepted(rec.ID)
	}
	if output != cmdutil.FormatJSON {
		fmt.Fprintln(f.IO.Out, rec.ID)
	}
	printAccepted(f, rec, sandboxShown(d.Config, rec))
	if lifecycle.DispatchEnded(rec.State) {
		printEvent(f, rec.State, rec)
		return finishDispatchOutput(f, rec, output)
	}
	if detached {
		started, err := sup.Start(ctx, rec.ID)
		if err != nil {
			if ctx.Err() != nil {
				return cmdutil.Interrupted("dispatch %s keeps going in its detached supervisor; see 'agora dispatch describe %s', stop it with 'agora dispatch cancel %s'", rec.ID, rec.ID, rec.ID)
			}
			return err
		}
		printEvent(f, started.State, started)
		if output == cmdutil.FormatJSON {
			return cmdutil.WriteJSON(f.IO.Out, started)
		}
		fmt.Fprintf(f.IO.ErrOut, "agora: detached; follow with 'agora dispatch logs %s -f' or 'agora dispatch describe %s'\n", rec.ID, rec.ID)
		return nil
	}
	final, err := superviseHere(ctx, f, d, sup, rec, show)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		// Supervise recorded the end before it returned: the sandbox is gone. The record is
		// still the result (-o json prints it); the exit code says it was interrupted.
		_ = finishDispatchOutput(f, final, output)
		return cmdutil.Interrupted("dispatch %s was cancelled: the sandbox was stopped and the end recorded (%s, %s); see 'agora dispatch describe %s'",
			final.ID, final.State, cmdutil.OrDash(final.Reason), final.ID)
	}
	deliverCallbacks(ctx, f, final)
	return finishDispatchOutput(f, final, output)
}

// superviseHere supervises rec in this process and shows its progress. In serve, a hand-off
// of a target that keeps warm slots, showing no phases, goes where serve's plan and MCP
// dispatches of it go, a standby supervisor (or a cold detached one, which teaches the
// target its shape), instead (superviseWarm): what it prints is the same.
func superviseHere(ctx context.Context, f *cmdutil.Factory, d *dispatch.Dispatcher, sup *detach.Supervisors, rec *dispatch.Record, show bool) (*dispatch.Record, error) {
	if !show && sup.Warm(rec.Target) {
		return superviseWarm(ctx, f, d, sup, rec)
	}
	p := &dispatchProgress{f: f, d: d, id: rec.ID, show: show}
	followCtx, stopFollow := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { p.follow(followCtx) })
	final, err := d.SuperviseAccepted(ctx, rec, p.event)
	stopFollow()
	wg.Wait()
	p.stop()
	return final, err
}

// printAccepted writes the accepted line, naming the dispatch's sandbox as sandbox.
func printAccepted(f *cmdutil.Factory, r *dispatch.Record, sandbox string) {
	fmt.Fprintf(f.IO.ErrOut, "agora: %s accepted: %s@%s on %s (sandbox %s, network %s)\n",
		r.ID, r.Subagent, r.SubagentDigest.Short(), r.Target, sandbox, r.Network)
	if r.Learn {
		fmt.Fprintf(f.IO.ErrOut, "agora: %s is a LEARN dispatch: what its grant would refuse is recorded (*.would_deny), not refused\n", r.ID)
	}
}

// sandboxShown is what the accepted line calls a dispatch's sandbox. The record's sandbox
// field says only whether its target isolates: "bwrap" is agora.yaml's word for isolation on
// every provider, so a docker target's dispatch would read "sandbox bwrap" while it runs in a
// container. The record keeps its field (records and audit entries are hashed as written).
func sandboxShown(cfg *config.Config, r *dispatch.Record) string {
	t, err := cfg.Target(r.Target)
	if err != nil || r.Sandbox != compute.SandboxBwrap {
		return r.Sandbox
	}
	switch t.Provider {
	case config.ProviderDocker:
		return "container"
	case config.ProviderKubernetes:
		if t.Backend == config.BackendAgentSandbox {
			return "pod of an agent-sandbox Sandbox"
		}
		return "pod"
	}
	return r.Sandbox
}

func printEvent(f *cmdutil.Factory, kind string, r *dispatch.Record) {
	switch kind {
	case lifecycle.DispatchAccepted:
		printAccepted(f, r, r.Sandbox)
	case lifecycle.DispatchStarted:
		fmt.Fprintf(f.IO.ErrOut, "agora: %s started (%s)\n", r.ID, r.ProviderTaskID)
	case lifecycle.DispatchFailed:
		fmt.Fprintf(f.IO.ErrOut, "agora: %s failed: %s: %s\n", r.ID, r.Reason, cmdutil.AgentText(r.Detail))
	default:
		fmt.Fprintf(f.IO.ErrOut, "agora: %s %s\n", r.ID, kind)
	}
}

// finishDispatchOutput prints the result and turns the terminal state into the exit code.
func finishDispatchOutput(f *cmdutil.Factory, r *dispatch.Record, output string) error {
	if output == cmdutil.FormatJSON {
		if err := cmdutil.WriteJSON(f.IO.Out, r); err != nil {
			return err
		}
	} else {
		printSummary(f, r)
	}
	if code := dispatchExitCode(r); code != cmdutil.ExitOK {
		return &cmdutil.ExitCodeError{Code: code}
	}
	return nil
}

func dispatchExitCode(r *dispatch.Record) int {
	switch r.State {
	case lifecycle.DispatchFinished:
		return cmdutil.ExitOK
	case lifecycle.DispatchNeedsInput, lifecycle.DispatchAnswered:
		// An answered dispatch ended needs_input; its answer is its child.
		return cmdutil.ExitNeedsInput
	case lifecycle.DispatchFailed:
		if r.Reason == lifecycle.ReasonProviderFailed || r.Reason == lifecycle.ReasonFetchFailed || r.Reason == lifecycle.ReasonLost ||
			r.Reason == lifecycle.ReasonGatewayUnreachable {
			return cmdutil.ExitError
		}
		return cmdutil.ExitWorkerFail
	case lifecycle.DispatchCancelled:
		return cmdutil.ExitWorkerFail
	}
	return cmdutil.ExitError
}

func printSummary(f *cmdutil.Factory, r *dispatch.Record) {
	w := f.IO.ErrOut
	dur := ""
	if r.StartedAt != nil && r.EndedAt != nil {
		dur = ", " + r.EndedAt.Sub(*r.StartedAt).Round(time.Millisecond).String()
	}
	exit := ""
	if r.ExitCode != nil {
		exit = fmt.Sprintf("exit %d", *r.ExitCode)
	}
	fmt.Fprintf(w, "\ndispatch  %s  %s%s\n", r.ID, r.State, parens(strings.TrimPrefix(strings.Join(nonEmpty(r.Reason, exit), ", ")+dur, ", ")))
	fmt.Fprintf(w, "subagent  %s@%s\n", r.Subagent, r.SubagentDigest)
	fmt.Fprintf(w, "target    %s (isolation %s, network %s)\n", r.Target, cmdutil.OrDash(r.Isolation), r.Network)
	if r.Learn {
		fmt.Fprintf(w, "mode      learn (see 'agora audit log --kind tool.would_deny', net.would_deny)\n")
	}
	if r.Detail != "" && r.State != lifecycle.DispatchFinished {
		fmt.Fprintf(w, "detail    %s\n", cmdutil.AgentText(r.Detail))
	}
	if r.Usage != nil {
		fmt.Fprintf(w, "usage     %s\n", cmdutil.UsageLine(r.Usage, r.Budget))
	}
	if res := r.Result; res != nil {
		if res.NeedsInput != nil {
			fmt.Fprintf(w, "question  %s\n", cmdutil.AgentText(res.NeedsInput.Question))
			for _, o := range res.NeedsInput.Options {
				fmt.Fprintf(w, "  option  %s\n", cmdutil.AgentText(o))
			}
			fmt.Fprintf(w, "          -> agora dispatch resume %s --answer TEXT\n", r.ID)
		}
		if res.Patch != nil {
			fmt.Fprintf(w, "patch     %d bytes  -> agora dispatch patch %s | git apply\n", res.Patch.Size, r.ID)
		}
		if len(res.Outputs) > 0 {
			fmt.Fprintf(w, "outputs   %d file(s)  -> agora dispatch outputs %s --to DIR\n", len(res.Outputs), r.ID)
		}
		if res.Stdout != nil {
			fmt.Fprintf(w, "logs      stdout %d bytes, stderr %d bytes  -> agora dispatch logs %s\n", res.Stdout.Size, sizeOf(res.Stderr), r.ID)
		}
		if res.Transcript != nil {
			fmt.Fprintf(w, "transcript %d bytes  -> agora dispatch logs %s --transcript\n", res.Transcript.Size, r.ID)
		}
		if len(res.Truncated) > 0 {
			fmt.Fprintf(w, "truncated %s (over the cap)\n", strings.Join(res.Truncated, ", "))
		}
	}
	if r.Verify != nil {
		gate.Print(w, "verify    ", r.Verify, r.Verdict, 20)
	}
}

func sizeOf(a *dispatch.Artifact) int64 {
	if a == nil {
		return 0
	}
	return a.Size
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

type dispatchSuperviseOptions struct {
	f  *cmdutil.Factory
	id string
	// standby is --standby TARGET: wait, with a warm slot, for the holder's claim.
	standby string
}

func newDispatchSuperviseCmd(f *cmdutil.Factory, runF func(*dispatchSuperviseOptions) error) *cobra.Command {
	opts := &dispatchSuperviseOptions{f: f}
	cmd := &cobra.Command{
		Use:   "supervise ID | --standby TARGET",
		Short: "Run an accepted dispatch to its end (used by --detach)",
		Long: `Run an accepted dispatch to its end. Started by 'dispatch run --detach', 'orch serve'
and 'mcp serve', never by hand.

With --standby TARGET it is a warm slot of 'orch serve' or 'mcp serve': it starts a sandbox
of the target's shape and waits for the one dispatch id its holder hands it on fd 3 (a
socket only the holder has); it exits, killing the sandbox, when the holder goes away first.`,
		Hidden: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if opts.standby != "" {
				return cmdutil.ExactArgs(0, "no ID with --standby")(cmd, args)
			}
			return cmdutil.ExactArgs(1, "ID")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.standby == "" {
				opts.id = args[0]
			}
			return cmdutil.RunCmd(cmd, opts, runF, dispatchSuperviseRun)
		},
	}
	cmd.Flags().StringVar(&opts.standby, "standby", "", "wait as a warm slot of TARGET for a dispatch id on fd 3")
	return cmd
}

func dispatchSuperviseRun(ctx context.Context, opts *dispatchSuperviseOptions) error {
	keepLeaderFence()
	if opts.standby != "" {
		return dispatchStandbyRun(ctx, opts)
	}
	d, err := opts.f.Dispatcher(ctx)
	if err != nil {
		return err
	}
	final, err := d.Supervise(ctx, opts.id, nil)
	if err != nil {
		return err
	}
	deliverCallbacks(ctx, opts.f, final)
	return nil
}

// keepLeaderFence fences every commit of a supervisor a leading serve started with the
// leader's own fence (fencefile): one whose leader lost the lease commits nothing, and
// the supervisors it starts in turn keep the same fence.
func keepLeaderFence() {
	check, env, ok := fencefile.FromEnv()
	if !ok {
		return
	}
	store.SetFence(check)
	fencefile.SetInherited(env)
}

// deliverCallbacks tries the dispatch's outbox a few times; what stays undelivered is retried
// by 'agora dispatch deliver'.
func deliverCallbacks(ctx context.Context, f *cmdutil.Factory, r *dispatch.Record) {
	if r.CallbackURL == "" {
		return
	}
	c, err := f.Courier(ctx)
	if err != nil {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: callbacks not delivered: %v\n", err)
		return
	}
	for attempt := 0; attempt < 3; attempt++ {
		_, pending, err := c.Flush(ctx, r.ID)
		if err != nil || pending == 0 {
			return
		}
		time.Sleep(time.Duration(attempt+1) * 500 * time.Millisecond)
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: warning: some callbacks of %s are not delivered yet; 'agora dispatch deliver' retries them\n", r.ID)
}

// factoryOptions are the options of a command that takes no flags and no arguments.
type factoryOptions struct {
	f *cmdutil.Factory
}

func newDispatchDeliverCmd(f *cmdutil.Factory, runF func(*factoryOptions) error) *cobra.Command {
	opts := &factoryOptions{f: f}
	return &cobra.Command{
		Use:   "deliver",
		Short: "Retry undelivered callbacks that are due",
		Args:  cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmdutil.RunCmd(cmd, opts, runF, dispatchDeliverRun)
		},
	}
}

func dispatchDeliverRun(ctx context.Context, opts *factoryOptions) error {
	c, err := opts.f.Courier(ctx)
	if err != nil {
		return err
	}
	delivered, pending, err := c.Flush(ctx, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.f.IO.Out, "delivered %d, pending %d\n", delivered, pending)
	return nil
}
