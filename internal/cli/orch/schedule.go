package orch

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/cron"
)

func newOrchScheduleCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Run a plan at the slots of a cron spec (a person's standing order)",
		Long: `A schedule runs a plan at every slot of a cron spec read in a time zone: 'agora orch serve'
submits the slot's run, with the id NAME@SLOT (the slot in UTC, RFC 3339), and then marks the
slot fired. A serve stopped at any point (even kill -9) gives a slot exactly one run: the next
serve finds a run it submitted and did not mark, and a slot submitted twice is the same run.
Slots that came while serve was down are coalesced into one catch-up run for the latest of
them, whose status says how many were missed ('missed: N').

The plan is validated when the schedule is added (its subagents, env bundles, targets, queue
and workspace too) and stored in its canonical form; at each slot its references are looked
up again and its workspace pinned to the commit its revision names then. A slot whose plan
no longer validates (a subagent was retired) is refused and audited, and the schedule goes
on to its next slot. add and remove are on this command line only (the service's socket
admits serve's own user only), never over MCP; list and show are readable over MCP too.`,
	}
	cmd.AddCommand(newOrchScheduleAddCmd(f, nil), newOrchScheduleRemoveCmd(f, nil), newOrchScheduleListCmd(f, nil),
		newOrchScheduleShowCmd(f, nil))
	return cmd
}

type orchScheduleAddOptions struct {
	f                     *cmdutil.Factory
	name, path            string
	spec, zone, workspace string
	output                string
}

func newOrchScheduleAddCmd(f *cmdutil.Factory, runF func(*orchScheduleAddOptions) error) *cobra.Command {
	opts := &orchScheduleAddOptions{f: f}
	cmd := &cobra.Command{
		Use:   "add NAME --cron SPEC [--tz ZONE] [--workspace NAME[@REV]] PLAN",
		Short: "Add a schedule: run PLAN at every slot of a cron spec",
		Long: `Add schedule NAME (1-63 of a-z 0-9 _ -): run PLAN (YAML or JSON, '-' for stdin) at every
slot of --cron, read in --tz.

--cron is five fields, minute hour day-of-month month day-of-week ('0 2 * * *' is 02:00
every day, '*/15 9-17 * * mon-fri' every quarter hour of a working day), or one of @hourly,
@daily (@midnight), @weekly, @monthly, @yearly (@annually). @every and seconds are refused: a
slot is a minute of the clock.

--tz is an IANA zone (Europe/Berlin, America/New_York; default UTC). A minute a clock change
skips has no slot that day; a minute it repeats fires once, the first time it comes.

--workspace gives every run a checkout of the catalog workspace NAME at REV (default its
default revision), resolved to a commit at each slot; a plan may name its workspace itself,
and the two must agree. The first slot is the first after now: earlier ones are not missed.`,
		Example: `  agora orch schedule add nightly --cron '0 2 * * *' --tz Europe/Berlin nightly.yaml
  agora orch schedule add triage --cron '*/30 8-18 * * mon-fri' --workspace app@main triage.yaml -o json`,
		Args: cmdutil.ExactArgs(2, "NAME and PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.name, opts.path = args[0], args[1]
			if opts.spec == "" {
				return cmdutil.UsageErrorf(cmd, "--cron SPEC is required, such as '0 2 * * *'")
			}
			if err := cron.CheckName(opts.name); err != nil {
				return cmdutil.UsageErrorf(cmd, "%v", err)
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchScheduleAddRun)
		},
	}
	cmdutil.AddOutputFlag(cmd, &opts.output)
	fl := cmd.Flags()
	fl.StringVar(&opts.spec, "cron", "", "the cron spec: five fields or a descriptor such as @daily (required)")
	fl.StringVar(&opts.zone, "tz", cron.DefaultZone, "the IANA time zone the spec is read in")
	fl.StringVar(&opts.workspace, "workspace", "", "catalog workspace every run works on: NAME or NAME@REV, resolved at each slot")
	return cmd
}

func orchScheduleAddRun(ctx context.Context, opts *orchScheduleAddOptions) error {
	f := opts.f
	// The spec and zone are checked here too, so a typo is refused before the plan is read.
	if _, err := cron.Parse(opts.spec, opts.zone); err != nil {
		return err
	}
	name, src, err := readPlan(f, opts.path)
	if err != nil {
		return err
	}
	req := api.ScheduleRequest{Name: opts.name, Spec: opts.spec, Zone: opts.zone, File: filepath.Base(name), Source: src, Actor: f.Actor()}
	if opts.workspace != "" {
		req.Workspace, req.Revision = cmdutil.SplitWorkspace(opts.workspace)
	}
	c, err := f.OrchClient(ctx)
	if err != nil {
		return err
	}
	s, err := c.AddSchedule(ctx, req)
	if err != nil {
		return err
	}
	if opts.output == cmdutil.FormatJSON {
		return cmdutil.WriteJSON(f.IO.Out, s)
	}
	fmt.Fprintln(f.IO.Out, s.Name)
	fmt.Fprintf(f.IO.ErrOut, "agora: schedule %s added: plan %s (%s) at '%s' in %s; next slot %s (run id %s@%s)\n", s.Name, s.PlanName,
		cmdutil.Plural(s.Tasks, "task"), s.Spec, s.Zone, fmtSlot(s.NextDue), s.Name, fmtSlot(s.NextDue))
	return nil
}

func newOrchScheduleRemoveCmd(f *cmdutil.Factory, runF func(*cmdutil.PrintOptions) error) *cobra.Command {
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a schedule; the runs it started are not touched",
		Long: `Remove schedule NAME: no slot of it fires again. The runs it started go on (cancel one with
'agora orch cancel RUN'). A slot being submitted as the schedule is removed still gets its run.`,
		Example: `  agora orch schedule remove nightly`,
		Args:    cmdutil.ExactArgs(1, "NAME"),
	}, &cmdutil.PrintOptions{F: f}, runF, func(ctx context.Context, opts *cmdutil.PrintOptions) error {
		c, err := opts.F.OrchClient(ctx)
		if err != nil {
			return err
		}
		s, err := c.RemoveSchedule(ctx, opts.Arg, opts.F.Actor())
		if err != nil {
			return err
		}
		return cmdutil.Emit(opts.F.IO, opts.Output, s, func(s api.Schedule) error {
			fmt.Fprintln(opts.F.IO.Out, s.Name)
			fmt.Fprintf(opts.F.IO.ErrOut, "agora: schedule %s removed; its last run was %s\n", s.Name, cmdutil.OrDash(s.LastRun))
			return nil
		})
	})
}

func newOrchScheduleListCmd(f *cmdutil.Factory, runF func(*cmdutil.PrintOptions) error) *cobra.Command {
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:     "list",
		Short:   "List the schedules with their last and next slots",
		Example: `  agora orch schedule list -o json`,
		Args:    cmdutil.NoArgs,
	}, &cmdutil.PrintOptions{F: f}, runF, func(ctx context.Context, opts *cmdutil.PrintOptions) error {
		c, err := opts.F.OrchClient(ctx)
		if err != nil {
			return err
		}
		list, err := c.Schedules(ctx)
		if err != nil {
			return err
		}
		if list == nil {
			list = []api.Schedule{}
		}
		return cmdutil.Emit(opts.F.IO, opts.Output, api.Schedules{Schedules: list}, func(v api.Schedules) error {
			rows := make([][]string, len(v.Schedules))
			for i, s := range v.Schedules {
				last := cmdutil.OrDash(s.LastRun)
				if s.LastError != "" {
					last = "refused " + fmtSlot(s.LastSlot)
				}
				rows[i] = []string{s.Name, s.Spec, s.Zone, s.PlanName, s.Queue, fmtSlot(s.NextDue), last}
			}
			return cmdutil.PrintTable(opts.F.IO, []string{"NAME", "CRON", "ZONE", "PLAN", "QUEUE", "NEXT", "LAST RUN"}, rows)
		})
	})
}

func newOrchScheduleShowCmd(f *cmdutil.Factory, runF func(*cmdutil.PrintOptions) error) *cobra.Command {
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:     "show NAME",
		Short:   "Show a schedule and its recent runs",
		Example: `  agora orch schedule show nightly -o json`,
		Args:    cmdutil.ExactArgs(1, "NAME"),
	}, &cmdutil.PrintOptions{F: f}, runF, func(ctx context.Context, opts *cmdutil.PrintOptions) error {
		c, err := opts.F.OrchClient(ctx)
		if err != nil {
			return err
		}
		s, err := c.Schedule(ctx, opts.Arg)
		if err != nil {
			return err
		}
		return cmdutil.Emit(opts.F.IO, opts.Output, s, func(s api.Schedule) error {
			w := opts.F.IO.ErrOut
			fmt.Fprintf(w, "schedule %s: '%s' in %s, added by %s %s\n", s.Name, s.Spec, s.Zone, s.Actor, s.CreatedAt.UTC().Format(time.RFC3339))
			fmt.Fprintf(w, "plan %s (%s, queue %s), %s\n", s.PlanName, cmdutil.Plural(s.Tasks, "task"), s.Queue, s.PlanDigest)
			if s.Workspace != "" {
				fmt.Fprintf(w, "workspace %s at %s, resolved at each slot\n", s.Workspace, cmdutil.OrDash(s.Revision))
			}
			fmt.Fprintf(w, "next slot %s\n", fmtSlot(s.NextDue))
			if s.LastError != "" {
				fmt.Fprintf(w, "last slot %s refused: %s\n", fmtSlot(s.LastSlot), cmdutil.AgentText(s.LastError))
			}
			rows := make([][]string, len(s.Runs))
			for i, r := range s.Runs {
				rows[i] = []string{r.ID, r.State, r.Slot.UTC().Format(time.RFC3339), strconv.Itoa(r.Missed)}
			}
			return cmdutil.PrintTable(opts.F.IO, []string{"RUN", "STATE", "SLOT", "MISSED"}, rows)
		})
	})
}

// fmtSlot is a slot in UTC, RFC 3339, or "-" for none.
func fmtSlot(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
