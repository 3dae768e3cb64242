package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch/api"
)

func newOrchPatchesCmd(f *Factory) *cobra.Command {
	var to, output string
	cmd := &cobra.Command{
		Use:   "patches RUN --to DIR",
		Short: "Write every succeeded task's patch into a directory",
		Long: `Write the patch of each task that succeeded, from its last attempt's dispatch, to
DIR/<task>.patch (git apply on the run's revision). Tasks that changed nothing get no
file. Review them: agents wrote them.

Patches are written 0600 (DIR, if created, 0700). Nothing already in DIR is followed or
overwritten: a symbolic link or a different file where a patch goes is an error, and a
file with the same patch is left as it is, so a rerun succeeds.`,
		Example: `  agora orch patches nightly-fixes --to ./review && git apply --check review/*.patch`,
		Args:    exactArgs(1, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			if to == "" {
				return usageErrorf(cmd, "patches needs --to DIR")
			}
			c, err := f.OrchClient(cmd.Context())
			if err != nil {
				return err
			}
			run, err := c.Status(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			h, err := f.Home(cmd.Context())
			if err != nil {
				return err
			}
			records := dispatch.NewRecords(h.DB, nil, f.Now)
			dir, err := openOutDir(to)
			if err != nil {
				return err
			}
			defer dir.Close()
			var out []api.Patch
			var rows [][]string
			for _, t := range run.Tasks {
				if t.State != api.TaskSucceeded || t.DispatchID == "" {
					continue
				}
				r, err := records.Get(cmd.Context(), t.DispatchID)
				if err != nil {
					return fmt.Errorf("task %s: %w", t.ID, err)
				}
				p := api.Patch{Task: t.ID, DispatchID: r.ID}
				if r.Result != nil && r.Result.Patch != nil && r.Result.Patch.Size > 0 {
					b, err := h.Blobs.Get(r.Result.Patch.Digest, 0)
					if err != nil {
						return fmt.Errorf("task %s: %w", t.ID, err)
					}
					path, err := dir.writeFile(t.ID+".patch", b)
					if err != nil {
						return fmt.Errorf("task %s: %w", t.ID, err)
					}
					p.Digest = string(r.Result.Patch.Digest)
					rows = append(rows, []string{t.ID, r.ID, path})
				} else {
					rows = append(rows, []string{t.ID, r.ID, "(no changes)"})
				}
				out = append(out, p)
			}
			if output == formatJSON {
				if out == nil {
					out = []api.Patch{}
				}
				return writeJSON(f.IO.Out, out)
			}
			return printTable(f.IO, []string{"TASK", "DISPATCH", "PATCH"}, rows)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "directory to write <task>.patch files into (created if missing)")
	addOutputFlag(cmd, &output)
	return cmd
}
