package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch/api"
)

func newOrchAuditCmd(f *Factory) *cobra.Command {
	var out string
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
		Args:    exactArgs(1, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf(cmd, "audit needs --out FILE")
			}
			ctx := cmd.Context()
			c, err := f.OrchClient(ctx)
			if err != nil {
				return err
			}
			run, err := c.Status(ctx, args[0])
			if err != nil {
				return err
			}
			if !run.Sealed {
				if !api.RunTerminal(run.State) {
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
			if _, err := cp.Checkpoint(ctx); err != nil {
				return err
			}
			records := dispatch.NewRecords(h.DB, nil, f.Now)
			var subjects []string
			manifests := []verify.Manifest{}
			for _, t := range run.Tasks {
				for _, id := range t.Dispatches {
					subjects = append(subjects, "dispatch/"+id)
					r, err := records.Get(ctx, id)
					if err != nil {
						return fmt.Errorf("task %s: %w", t.ID, err)
					}
					if !dispatch.IsTerminal(r.State) {
						// A run bundle holds closed attempts only: agora verify fails an
						// attempt with no terminal entry, as it would one whose end was cut.
						return fmt.Errorf("task %s: dispatch %s is still %s; a run bundle holds only ended dispatches, export it once this one ends", t.ID, id, r.State)
					}
					m, err := dispatch.Provenance(r)
					if err != nil {
						return err
					}
					manifests = append(manifests, verify.Manifest{Manifest: m})
				}
			}
			if len(subjects) == 0 {
				return fmt.Errorf("run %s fired no dispatch; there is nothing to bind its entries to", run.ID)
			}
			dispPart, err := cp.Export(ctx, audit.Selection{Subjects: subjects, Run: run.ID})
			if err != nil {
				return err
			}
			dispPart.Manifests = manifests
			rb := &verify.RunBundle{
				Format:     verify.RunFormat,
				Run:        verify.RunInfo{ID: run.ID, Name: run.Name, PlanDigest: run.PlanDigest},
				Orch:       orchPart,
				Dispatches: dispPart,
			}
			// A new 0600 file renamed over --out: a link planted there is replaced, never
			// written through (writeout.go).
			if err := writeOutFile(out, true, func(w io.Writer) error { return verify.WriteRunBundle(w, rb) }); err != nil {
				return err
			}
			fmt.Fprintf(f.IO.ErrOut, "agora: wrote %s: run %s, %d orch.db entries, %d agora.db entries, %d dispatch manifests\n",
				out, run.ID, len(orchPart.Entries), len(dispPart.Entries), len(manifests))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write the bundle to")
	return cmd
}
