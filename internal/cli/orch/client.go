package orch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/runread"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/capped"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// readPlan reads a plan file ("-" is stdin), capped at the format's limit.
func readPlan(f *cmdutil.Factory, path string) (string, []byte, error) {
	if path == "-" {
		b, err := io.ReadAll(io.LimitReader(f.IO.In, plan.MaxSourceSize+1))
		if err != nil {
			return "", nil, err
		}
		return "stdin", b, nil
	}
	b, err := capped.ReadFile(path, plan.MaxSourceSize+1)
	if err != nil {
		// The plan the command was given cannot be read (not there, not a file, too big):
		// invalid input, like a plan that does not parse.
		return "", nil, errclass.AsInvalid(fmt.Errorf("read plan: %w", err))
	}
	return path, b, nil
}

// planOptions are the options of a command about one plan file.
type planOptions struct {
	f    *cmdutil.Factory
	path string
	// repo, workspace, wait and newRun are submit's.
	repo      string
	workspace string
	wait      bool
	newRun    bool
	output    string
}

// validateResult is `orch validate -o json`.
type validateResult struct {
	Plan           string `json:"plan"`
	Valid          bool   `json:"valid"`
	Error          string `json:"error,omitempty"`
	Tasks          int    `json:"tasks"`
	Edges          int    `json:"edges"`
	Locks          int    `json:"locks"`
	CatalogChecked bool   `json:"catalog_checked"`
	// Warnings advise on the plan's verify gates (a gate without changes, a glob naming a
	// directory without /**); they never make it invalid.
	Warnings []plan.Warning `json:"warnings"`
	// BaseTree is the repository and revision the gates' globs were checked against ("" for
	// none).
	BaseTree string `json:"base_tree,omitempty"`
}

func newOrchValidateCmd(f *cmdutil.Factory, runF func(*planOptions) error) *cobra.Command {
	opts := &planOptions{f: f}
	cmd := &cobra.Command{
		Use:   "validate PLAN",
		Short: "Check a plan offline: every error at once, with its path",
		Long: `Check a plan (YAML or JSON, '-' for stdin) the way 'agora orch serve' does at submit,
without the service: the schema, the graph (unknown tasks, cycles printed as their path),
locks, retries and timeouts. When AGORA_HOME holds a catalog, subagent and env references,
targets and the plan's workspace and revision are checked against it in the same pass.

Warnings (on stderr; they never fail the command) advise on verify gates: a gate without
changes, which any new file can get past (runner shadowing such as unittest/__main__.py,
conftest.py, GNUmakefile), and a changes or protect glob that names a directory of the base
tree without /** ("tests" is that path alone). The base tree is --repo PATH[@REV], else the
git repository the current directory is in, at HEAD.`,
		Example: `  agora orch validate examples/plans/demo.yaml
  agora orch validate nightly.yaml --repo ~/src/app@main`,
		Args: cmdutil.ExactArgs(1, "PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.path = args[0]
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchValidateRun)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.output)
	cmd.Flags().StringVar(&opts.repo, "repo", "", "git repository whose tree the gates' globs are checked against: PATH or PATH@REV (default: the current directory's repository at HEAD)")
	return cmd
}

func orchValidateRun(ctx context.Context, opts *planOptions) error {
	f := opts.f
	name, src, err := readPlan(f, opts.path)
	if err != nil {
		return err
	}
	var refs plan.Refs
	checked := "catalog references not checked (no catalog in AGORA_HOME)"
	if dir, err := f.HomeDir(); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "agora.db")); err == nil {
			h, err := f.Home(ctx)
			if err != nil {
				return err
			}
			refs = catalogRefs{r: view.New(h.DB, h.Blobs), targets: h.Config.Target, queues: h.Config.CheckQueue}
			checked = "catalog references checked"
		}
	}
	// Structure and catalog together: every problem in one pass.
	p, err := plan.Validate(ctx, name, src, refs)
	if err != nil {
		if opts.output == cmdutil.FormatJSON {
			// The problems are the result: printed, and still an error for the exit code.
			cmdutil.WriteJSON(f.IO.Out, validateResult{Plan: name, Error: err.Error(), CatalogChecked: refs != nil, Warnings: []plan.Warning{}})
		}
		return err
	}
	edges, locks := 0, map[string]bool{}
	for _, t := range p.Resolve() {
		edges += len(t.Deps)
		for _, l := range t.Locks {
			locks[l.Name] = true
		}
	}
	warnings, base, err := gateWarnings(ctx, opts, p)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: %s: %s\n", name, w)
	}
	if opts.output == cmdutil.FormatJSON {
		return cmdutil.WriteJSON(f.IO.Out, validateResult{Plan: p.Name, Valid: true, Tasks: len(p.Tasks), Edges: edges, Locks: len(locks),
			CatalogChecked: refs != nil, Warnings: warnings, BaseTree: base})
	}
	globs := "gate globs checked against " + base
	if base == "" {
		globs = "gate globs not checked against a tree (no git repository here: --repo)"
	}
	fmt.Fprintf(f.IO.Out, "plan %s is valid: %s, %s, %s; %s; %s\n", p.Name, cmdutil.Plural(len(p.Tasks), "task"),
		cmdutil.Plural(edges, "edge"), cmdutil.Plural(len(locks), "lock"), checked, globs)
	return nil
}

func newOrchSubmitCmd(f *cmdutil.Factory, runF func(*planOptions) error) *cobra.Command {
	opts := &planOptions{f: f}
	cmd := &cobra.Command{
		Use:   "submit PLAN",
		Short: "Start a run of a plan; prints the run id",
		Long: `Submit a plan to the orchestrator service and print the run's id on stdout.

A run is identified by its name, its plan's digest, the versions its subagents resolved to,
and what it works on (the workspace or repository and the commit). A subagent the plan names
without a version (NAME, not NAME@sha256:HEX) is pinned now to its latest version: every task
of the run dispatches that version. Submitting exactly that again prints the existing run's
id and says so (a retried submit never starts two runs); --new-run starts another all the
same. The same name with another plan, another subagent version (a subagent fixed since, say),
workspace or commit starts a new run and says why; the name then means the newest of them (a
run id always means its own run).

--workspace gives every task of the run a checkout of the catalog workspace NAME at REV
(a branch or tag its patterns allow, or a full commit id; default its default revision),
pinned to one commit now; a plan may name its workspace itself ("workspace:"), and the two
must agree. --repo gives a checkout of the repository PATH at REV instead (a person's
choice; over MCP only workspaces exist). Without either each task starts in an empty
workspace. --wait watches the run and exits with its outcome, like 'agora orch watch'.`,
		Example: `  agora orch submit nightly.yaml --workspace app@main --wait
  agora orch submit nightly.yaml --repo ~/src/app@main
  agora orch submit nightly.yaml --workspace app@main --new-run`,
		Args: cmdutil.ExactArgs(1, "PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.path = args[0]
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchSubmitRun)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.output)
	cmd.Flags().StringVar(&opts.repo, "repo", "", "git repository every task works on: PATH or PATH@REV (default HEAD)")
	cmd.Flags().StringVar(&opts.workspace, "workspace", "", "catalog workspace every task works on: NAME or NAME@REV")
	cmd.MarkFlagsMutuallyExclusive("repo", "workspace")
	cmd.Flags().BoolVar(&opts.wait, "wait", false, "watch the run and exit with its outcome")
	cmd.Flags().BoolVar(&opts.newRun, "new-run", false, "start a new run even when a run of the same plan, subagents and commit exists")
	return cmd
}

func orchSubmitRun(ctx context.Context, opts *planOptions) error {
	f := opts.f
	name, src, err := readPlan(f, opts.path)
	if err != nil {
		return err
	}
	// The service validates the plan, structure and catalog together, and answers every
	// problem at once: a local structural check first would report them in two rounds.
	req := api.SubmitRequest{File: filepath.Base(name), Source: src, Actor: f.Actor(), NewRun: opts.newRun}
	if opts.repo != "" {
		path, rev := cmdutil.SplitRepo(opts.repo)
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		req.Repo, req.Revision = abs, rev
	}
	if opts.workspace != "" {
		req.Workspace, req.Revision = cmdutil.SplitWorkspace(opts.workspace)
	}
	c, err := f.OrchClient(ctx)
	if err != nil {
		return err
	}
	resp, err := c.Submit(ctx, req)
	if err != nil {
		return err
	}
	if opts.output == cmdutil.FormatJSON {
		if err := cmdutil.WriteJSON(f.IO.Out, resp); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(f.IO.Out, resp.Run.ID)
	}
	switch {
	case !resp.Created:
		fmt.Fprintf(f.IO.ErrOut, "agora: the same plan, %s as run %s (%s, %s): returning it; --new-run starts another\n",
			api.SameWhat(resp.Run), resp.Run.ID, resp.Run.Name, resp.Run.State)
	case resp.Why != "":
		fmt.Fprintf(f.IO.ErrOut, "agora: run %s (%s) (new) submitted with %s: %s\n", resp.Run.ID, resp.Run.Name, cmdutil.Plural(resp.Run.Total, "task"), resp.Why)
	default:
		fmt.Fprintf(f.IO.ErrOut, "agora: run %s (%s) (new) submitted with %s\n", resp.Run.ID, resp.Run.Name, cmdutil.Plural(resp.Run.Total, "task"))
	}
	if !opts.wait {
		fmt.Fprintf(f.IO.ErrOut, "agora: follow it with 'agora orch watch %s'\n", resp.Run.ID)
		return nil
	}
	// stdout carries only the run id: the progress goes to stderr.
	return watchRun(ctx, f, resp.Run.ID, f.IO.ErrOut, false, false)
}

type orchRunsOptions struct {
	cmdutil.PrintOptions
	limit int
}

func newOrchRunsCmd(f *cmdutil.Factory, runF func(*orchRunsOptions) error) *cobra.Command {
	opts := &orchRunsOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := &cobra.Command{
		Use:     "runs",
		Short:   "List runs, newest first",
		Example: `  agora orch runs --limit 10 --output json`,
		Args:    cmdutil.NoArgs,
	}
	cmd.Flags().IntVar(&opts.limit, "limit", 50, "list at most this many runs")
	return cmdutil.NewPrintCmd(cmd, opts, runF, orchRunsRun)
}

func orchRunsRun(ctx context.Context, opts *orchRunsOptions) error {
	f := opts.F
	c, err := f.OrchClient(ctx)
	if err != nil {
		return err
	}
	runs, err := c.Runs(ctx, opts.limit)
	if err != nil {
		return err
	}
	return cmdutil.Emit(f.IO, opts.Output, runs, func(runs []api.Run) error {
		rows := make([][]string, len(runs))
		for i, r := range runs {
			sealed := ""
			if r.Sealed {
				sealed = " (sealed)"
			}
			rows[i] = []string{r.ID, r.Name, r.State + sealed, progress(r), cmdutil.FmtTime(f.IO, f.Now(), r.CreatedAt), r.Actor}
		}
		return cmdutil.PrintTable(f.IO, []string{"ID", "NAME", "STATE", "DONE", "CREATED", "BY"}, rows)
	})
}

// progress is "done/total" where done counts terminal tasks.
func progress(r api.Run) string {
	return fmt.Sprintf("%d/%d", doneTasks(r), r.Total)
}

// doneTasks counts r's tasks in a terminal state (a rejected fix among them: it is done).
func doneTasks(r api.Run) int {
	done := 0
	for _, s := range lifecycle.TaskStates() {
		if lifecycle.TaskEnded(s) {
			done += r.Counts[s]
		}
	}
	return done
}

// runOptions are the options of a command about one run (arg: an id or a plan name).
type runOptions struct {
	cmdutil.PrintOptions
}

func newOrchStatusCmd(f *cmdutil.Factory, runF func(*runOptions) error) *cobra.Command {
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "status [RUN]",
		Short: "Show a run and its tasks (RUN is an id or a plan name), or the queues",
		Long: `Show a run and its tasks. RUN is a run id, or a plan name: a name several runs share (the
same plan on another workspace or commit is a new run under the same name) means the newest
of them, and the command says so on stderr ("name_runs" in JSON); name another by its id
('agora orch runs' lists them). watch, patches, audit, cancel, answer, retry and seal read
RUN the same way. When 'agora orch serve' is not running, status reads orch.db read-only
and says it shows a snapshot of what serve last wrote.

A run's status names its queue (queues: in agora.yaml) with the tasks running on it and its
depth, the ready tasks of its runs waiting to start ("queue_state" in JSON); a run a
schedule started names the schedule, its slot and how many earlier slots were missed and
coalesced into it. Without RUN, status lists the queues.`,
		Example: `  agora orch status nightly-fixes --output json
  agora orch status`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cmdutil.UsageErrorf(cmd, "%s takes at most one RUN (got %d arguments)", cmd.CommandPath(), len(args))
			}
			return nil
		},
	}, &runOptions{cmdutil.PrintOptions{F: f}}, runF, orchStatusRun)
}

func orchStatusRun(ctx context.Context, opts *runOptions) error {
	f := opts.F
	if opts.Arg == "" {
		return orchQueuesRun(ctx, f, opts.Output)
	}
	_, r, err := runread.Status(ctx, f, opts.Arg)
	if errors.Is(err, client.ErrNotRunning) {
		r, err = runread.Snapshot(ctx, f, opts.Arg, err)
	}
	if err != nil {
		return err
	}
	r = withLearn(ctx, f, withOptions(ctx, f, r))
	return cmdutil.Emit(f.IO, opts.Output, r, func(r api.Run) error {
		printRunHeader(f, r)
		if r.Next != "" {
			// What only a person can do next, as the MCP status and watch say it.
			fmt.Fprintf(f.IO.ErrOut, "next: %s\n", r.Next)
		}
		return printTasks(f, r)
	})
}

func printRunHeader(f *cmdutil.Factory, r api.Run) {
	sealed := ""
	if r.Sealed {
		sealed = ", sealed"
	}
	fmt.Fprintf(f.IO.ErrOut, "run %s (%s): %s%s, %s tasks done, plan %s\n", r.ID, r.Name, r.State, sealed, progress(r), r.PlanDigest)
	if line := queueLine(r); line != "" {
		fmt.Fprintln(f.IO.ErrOut, line)
	}
	if line := slotLine(r); line != "" {
		fmt.Fprintln(f.IO.ErrOut, line)
	}
	if r.Usage != nil || r.Budget != nil {
		u := r.Usage
		if u == nil {
			u = &budget.Usage{}
		}
		fmt.Fprintf(f.IO.ErrOut, "usage: %s\n", cmdutil.UsageLine(u, r.Budget))
	}
}

func printTasks(f *cmdutil.Factory, r api.Run) error {
	rows := make([][]string, len(r.Tasks))
	for i, t := range r.Tasks {
		why := t.Reason
		if t.Detail != "" {
			why = strings.TrimSpace(why + ": " + cmdutil.AgentText(t.Detail))
		}
		if t.Question != "" {
			why = "asks: " + cmdutil.AgentText(t.Question)
		}
		if t.RetryAt != nil {
			why = strings.TrimSpace(why + " (retry " + t.RetryAt.Format(time.RFC3339) + ")")
		}
		if v := t.Review; v != nil {
			why = "approves"
			if !v.Approve {
				why = "rejects: " + cmdutil.AgentText(strings.Join(v.Reasons, "; "))
			}
		}
		if t.Product != "" {
			why = "succeeded with the work of its fix, dispatch " + t.Product
		}
		id := t.ID
		if t.Learn {
			id += " (learn)" // as dispatch list marks one: its patch feeds nothing by itself
		}
		rows[i] = []string{id, t.State, fmt.Sprint(t.Attempts), cmdutil.OrDash(t.DispatchID), taskVerdict(t), cmdutil.OrDash(cmdutil.Truncate(why, 100))}
	}
	return cmdutil.PrintTable(f.IO, []string{"TASK", "STATE", "ATTEMPTS", "DISPATCH", "VERIFY", "WHY"}, rows)
}

// taskVerdict is a task's verify gate in one word or two: - (no gate), pending (none
// recorded yet), passed, or failed: REASON.
func taskVerdict(t api.Task) string {
	switch {
	case t.Verify == nil && t.Verdict == nil:
		return "-"
	case t.Verdict == nil:
		return "pending"
	case t.Verdict.Passed:
		return "passed"
	}
	return "failed: " + t.Verdict.Reason
}

func newOrchWatchCmd(f *cmdutil.Factory, runF func(*runOptions) error) *cobra.Command {
	opts := &runOptions{cmdutil.PrintOptions{F: f}}
	cmd := &cobra.Command{
		Use:   "watch RUN",
		Short: "Follow a run until it ends; the exit code is its outcome",
		Long: `Follow a run: on a terminal a table with a progress bar, redrawn every second with each
running task's phase, elapsed time and last output line; otherwise one line per change
(and per change of a running task's phase or last line). -o json writes JSON lines: each
one object with one of "run" (the run's state), "event" (a change) or "progress" (the
running tasks). Ctrl-C stops watching; the run keeps running in 'agora orch serve'. Exits
when the run ends or needs an answer:

  0  the run succeeded
  3  the run failed or was cancelled
  4  a task needs input: answer with 'agora orch answer RUN TASK --answer TEXT'`,
		Args: cmdutil.ExactArgs(1, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Arg = args[0]
			if err := cmdutil.CheckOutput(cmd, opts.Output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchWatchRun)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.Output)
	return cmd
}

func orchWatchRun(ctx context.Context, opts *runOptions) error {
	return watchRun(ctx, opts.F, opts.Arg, opts.F.IO.Out, opts.F.IO.OutTTY, opts.Output == cmdutil.FormatJSON)
}

type orchActionOptions struct {
	f      *cmdutil.Factory
	action string
	req    api.ActionRequest

	task, answer string
}

func newOrchActionCmd(f *cmdutil.Factory, runF func(*orchActionOptions) error, action string) *cobra.Command {
	opts := &orchActionOptions{f: f, action: action}
	docs := map[string][3]string{
		"cancel": {"cancel RUN [--task TASK]", "Cancel a run, or one task and its dependents (CLI only)",
			`Cancel a whole run: no task of it fires again, running dispatches are cancelled, and the run
ends cancelled and sealed. With --task, only that task is cancelled and its dependents are
skipped; the rest of the run goes on.`},
		"answer": {"answer RUN TASK --answer TEXT", "Answer a task that needs input; a new attempt resumes it (CLI only)",
			`Answer the question of a task in needs_input. A new attempt of the task starts from the
same pinned subagent with the question and answer in its input ("agora_resume").`},
		"retry": {"retry RUN TASK", "Run a failed task again, and the dependents it skipped (CLI only)",
			`Make a failed (or cancelled) task ready again with a fresh retry budget; the dependents
skipped because of it become pending, unless another failed or cancelled task still holds
them (a run of many takes them back 2,048 at a time, before anything else). A task whose
dependency failed, was cancelled or was skipped cannot be retried: retry that one first. A
sealed or cancelled run cannot be retried.`},
		"seal": {"seal RUN", "Close a finished run for good (CLI only)",
			`Seal a run that ended: it accepts no further change (no retry), and a checkpoint of
orch.db is written so its audit bundle can be exported. Runs that succeed or are
cancelled are sealed automatically; failed runs stay open for 'retry' until sealed.`},
	}[action]
	nargs := 1
	if action == "answer" || action == "retry" {
		nargs = 2
	}
	cmd := &cobra.Command{
		Use:   docs[0],
		Short: docs[1],
		Long:  docs[2],
		Args:  cmdutil.ExactArgs(nargs, strings.TrimPrefix(docs[0], action+" ")),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.req = api.ActionRequest{Run: args[0], Task: opts.task, Actor: f.Actor()}
			if nargs == 2 {
				opts.req.Task = args[1]
			}
			if action == "answer" {
				if !cmd.Flags().Changed("answer") {
					return cmdutil.UsageErrorf(cmd, "answer needs --answer TEXT")
				}
				opts.req.Answer = opts.answer
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchActionRun)
		},
	}
	switch action {
	case "cancel":
		cmd.Flags().StringVar(&opts.task, "task", "", "cancel only this task (its dependents are skipped)")
	case "answer":
		cmd.Flags().StringVar(&opts.answer, "answer", "", "the answer to the task's question")
	}
	return cmd
}

func orchActionRun(ctx context.Context, opts *orchActionOptions) error {
	f := opts.f
	c, err := f.OrchClient(ctx)
	if err != nil {
		return err
	}
	r, err := c.Action(ctx, opts.action, opts.req)
	if err != nil {
		return err
	}
	runread.NoteShared(f, r)
	fmt.Fprintln(f.IO.ErrOut, actionOutcome(opts.action, opts.req, r))
	return nil
}
