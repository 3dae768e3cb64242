package orch

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/outdir"
	"github.com/agora-dev/agora/internal/cli/runread"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

type orchAuditOptions struct {
	f   *cmdutil.Factory
	run string
	out string
}

func newOrchAuditCmd(f *cmdutil.Factory, runF func(*orchAuditOptions) error) *cobra.Command {
	opts := &orchAuditOptions{f: f}
	cmd := &cobra.Command{
		Use:   "audit RUN --out FILE",
		Short: "Export a run's audit bundle: its orch.db entries and every dispatch of it",
		Long: `Export one run as a bundle that 'agora verify' checks offline: the run's entries of
orch.db and its dispatches' entries of agora.db, each with inclusion proofs against a
signed checkpoint and the latest anchored checkpoint, plus every dispatch's manifest
(catalog hashes, input and upstream inputs, product refs).

Only a sealed run is exported: it accepts no later write, so the bundle stays valid for
good. A run that ended but is not sealed yet (a failed run, kept open for 'retry') is
sealed first. Every dispatch of it must have ended: 'agora verify' fails an attempt with no
terminal entry. Both parts carry a selection signed with the audit key and naming the run.`,
		Example: `  agora orch audit nightly-fixes --out run.json && agora verify run.json --key ~/.local/share/agora/keys/audit.pub`,
		Args:    cmdutil.ExactArgs(1, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.run = args[0]
			if opts.out == "" {
				return cmdutil.UsageErrorf(cmd, "audit needs --out FILE")
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchAuditRun)
		},
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "file to write the bundle to")
	return cmd
}

// orchAuditRun seals the run if it ended unsealed, then writes its bundle.
func orchAuditRun(ctx context.Context, opts *orchAuditOptions) error {
	f, out := opts.f, opts.out
	c, run, err := runread.Status(ctx, f, opts.run)
	if err != nil {
		return err
	}
	if !run.Sealed {
		if !lifecycle.RunEnded(run.State) {
			return fmt.Errorf("run %s is still %s; its bundle can be exported once it ends", run.ID, run.State)
		}
		fmt.Fprintf(f.IO.ErrOut, "agora: sealing run %s (%s) first: it will accept no retry\n", run.ID, run.State)
		if run, err = c.Action(ctx, "seal", api.ActionRequest{Run: run.ID, Actor: f.Actor()}); err != nil {
			return err
		}
	}
	orchPart, err := c.Audit(ctx, run.ID)
	if err != nil {
		return err
	}
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	cp, err := f.Checkpointer(ctx)
	if err != nil {
		return err
	}
	rb, err := cp.ExportRun(ctx, runParts(run, orchPart), dispatch.NewRecords(h.DB, nil, f.Now))
	if err != nil {
		return err
	}
	// A new 0600 file renamed over --out: a link planted there is replaced, never
	// written through (writeout.go).
	if err := outdir.WriteFile(out, true, func(w io.Writer) error { return verify.WriteRunBundle(w, rb) }); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: wrote %s: run %s, %d orch.db entries, %d agora.db entries, %d dispatch manifests\n",
		out, run.ID, len(orchPart.Entries), len(rb.Dispatches.Entries), len(rb.Dispatches.Manifests))
	return nil
}
