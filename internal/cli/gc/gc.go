// Package gc is `agora gc`: retention run once, by a person (internal/retention/homesweep
// sweeps; a serve runs the same sweep every hour), or its plan with --dry-run.
package gc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/retention/homesweep"
)

type gcOptions struct {
	cmdutil.PrintOptions
	dryRun bool
}

func NewCmd(f *cmdutil.Factory, runF func(*gcOptions) error) *cobra.Command {
	opts := &gcOptions{PrintOptions: cmdutil.PrintOptions{F: f}}
	cmd := cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "gc",
		Short: "Purge the products of dispatches, and orchestrator runs, older than agora.yaml's retention",
		Long: `Purge what agora.yaml's retention has aged out: a dispatch's patch, outputs and inputs
after retention.blobs, its stdout, stderr and transcript after retention.logs, counted from
the dispatch's end; a sealed orchestrator run's rows in orch.db after retention.runs, counted
from the run's end. Without retention in agora.yaml nothing is ever purged. 'agora orch serve'
and 'agora mcp serve' run the same sweep in the background every hour.

Never purged: the audit log, checkpoints and anchors; the catalog; anything a live, waiting
(needs_input) or newer dispatch names, or a dispatch of an orchestrator run that has not
ended (blobs are content-addressed, so an old and a new dispatch may share one); a dispatch
whose end is missing, unreadable or in the future.

Each purge is recorded before its blobs are deleted: one retention.purged audit entry per
dispatch (the products, their digests, why, and the role: operator for you, retention-sweep
for serve), in the transaction that records it. If gc is killed in between, the next gc or
sweep finishes the deletion. A bundle exported afterwards still verifies and lists the
purged products ('agora verify' row "purged").

A run goes only when it is sealed (a failed run stays open for 'agora orch retry' until
'agora orch seal RUN'), ended long enough ago by a time that parses and is not in the future,
and no schedule names it as its last run. Its rows go with one retention.run_purged entry in
orch.db's log, in the same transaction; its dispatches stay, under blobs and logs. 'agora
orch status' of it then says it was purged by retention.

With replicate.keep_generations, gc (and serve's sweep) also deletes each replicated
database's generations older than the newest N whole ones (never the newest whole one, nor
one a restore falls back to), one retention.replica_pruned entry each, recorded first.

With leader: in agora.yaml only the orch serve holding the Lease purges (its background
sweep, fenced as its commits are): gc refuses, on every replica, all but --dry-run.

--dry-run lists what would go and changes nothing.`,
		Example: `  # What would go, as a table or as JSON
  agora gc --dry-run
  agora gc --dry-run -o json

  # Purge it, recorded as you (or --actor)
  agora gc`,
		Args: cmdutil.NoArgs,
	}, opts, runF, gcRun)
	cmd.Flags().BoolVar(&opts.dryRun, "dry-run", false, "list what would be purged; change nothing")
	return cmd
}

// gcReport is `agora gc -o json`.
type gcReport struct {
	DryRun   bool                `json:"dry_run"`
	Blobs    string              `json:"retention_blobs"`
	Logs     string              `json:"retention_logs"`
	Runs     string              `json:"retention_runs"`
	Items    []retention.Item    `json:"items"`
	Bytes    int64               `json:"bytes"`
	Pending  int                 `json:"pending"`
	RunItems []retention.RunItem `json:"runs"`
	RunsKept retention.RunsKept  `json:"runs_kept"`
	Result   *retention.Result   `json:"result,omitempty"`
	Location string              `json:"blob_store"`
	// Replicas are the replica generations replicate.keep_generations removes (or would).
	Replicas []replicate.PrunedGeneration `json:"replica_generations"`
}

func gcRun(ctx context.Context, opts *gcOptions) error {
	f := opts.F
	if err := refuseGCOffLeader(f, opts.dryRun); err != nil {
		return err
	}
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	pol, err := h.Config.Retention.Policy()
	if err != nil {
		return fmt.Errorf("agora.yaml retention: %w", err)
	}
	s := homesweep.Sweeper(h, pol, f.Now)
	rep := gcReport{DryRun: opts.dryRun, Blobs: days(pol.Blobs), Logs: days(pol.Logs), Runs: days(pol.Runs), Location: h.Blobs.Where()}
	if !pol.Set() && h.Config.Replicate.KeepGenerations == 0 && opts.Output != cmdutil.FormatJSON {
		fmt.Fprintf(f.IO.ErrOut, "agora: agora.yaml sets no retention: nothing is purged (see 'agora gc --help')\n")
	}
	var plan *retention.Plan
	if opts.dryRun {
		plan, err = s.Plan(ctx)
	} else {
		f.Wrote = true
		var res retention.Result
		plan, res, err = s.Run(ctx, f.Actor(), retention.RoleOperator, gcProgress(f))
		rep.Result = &res
	}
	if plan != nil {
		rep.Items, rep.Bytes, rep.Pending = plan.Items, plan.Bytes(), plan.Pending()
		rep.RunItems, rep.RunsKept = plan.Runs, plan.RunsKept
	}
	if rep.Items == nil {
		rep.Items = []retention.Item{}
	}
	if rep.RunItems == nil {
		rep.RunItems = []retention.RunItem{}
	}
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	var foreign []string
	rep.Replicas, foreign, err = homesweep.PruneReplicas(ctx, h, f.Now, opts.dryRun, f.Actor(), retention.RoleOperator)
	for _, why := range foreign {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: gc: left a replica generation: %s\n", why)
	}
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	return cmdutil.Emit(f.IO, opts.Output, rep, func(r gcReport) error { return gcText(f, r) })
}

// gcProgress reports each batch on stderr when it is a terminal.
func gcProgress(f *cmdutil.Factory) retention.Progress {
	if !f.IO.ErrTTY {
		return nil
	}
	return func(done, total int) {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d of %d products purged\n", done, total)
	}
}

func gcText(f *cmdutil.Factory, r gcReport) error {
	if len(r.Items) > 0 {
		rows := make([][]string, 0, len(r.Items))
		for _, it := range r.Items {
			rows = append(rows, []string{it.Dispatch, it.Product, it.Class, strconv.FormatInt(it.Size, 10),
				it.EndedAt.Format(time.DateOnly), string(it.Digest)})
		}
		if err := cmdutil.PrintTable(f.IO, []string{"DISPATCH", "PRODUCT", "CLASS", "BYTES", "ENDED", "DIGEST"}, rows); err != nil {
			return err
		}
	}
	if err := gcRunsTable(f, r); err != nil {
		return err
	}
	verb := "would purge"
	if !r.DryRun {
		verb = "purged"
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: gc: %s %d products (%d bytes) in %s (retention blobs %s, logs %s)\n",
		verb, len(r.Items), r.Bytes, r.Location, r.Blobs, r.Logs)
	gcRunsSummary(f, r, verb)
	for _, g := range r.Replicas {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %s replica generation %s/%s (began %s, %d segments)\n",
			verb, g.DB, g.Generation, g.Began.Format(time.RFC3339), g.Segments)
	}
	if r.Pending > 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d purges recorded by an interrupted sweep are finished first\n", r.Pending)
	}
	if res := r.Result; res != nil {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d blobs deleted, %d already gone, %d stored again since the sweep began (left for the next one), %d needed again (kept)\n",
			res.Deleted, res.Absent, res.Deferred, res.KeptAgain)
		if res.RunsSkipped > 0 {
			fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d runs left: gone, changed or named by a schedule since the plan\n", res.RunsSkipped)
		}
		for _, why := range res.Refused {
			fmt.Fprintf(f.IO.ErrOut, "agora: warning: gc: %s\n", why)
		}
	}
	return nil
}

// days renders a retention age, "keep" when unset.
func days(d time.Duration) string {
	if d <= 0 {
		return "keep"
	}
	return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
}
