package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch/api"
)

type orchPatchesOptions struct {
	f      *Factory
	run    string
	to     string
	output string
}

func newOrchPatchesCmd(f *Factory, runF func(*orchPatchesOptions) error) *cobra.Command {
	opts := &orchPatchesOptions{f: f}
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
			opts.run = args[0]
			if err := checkOutput(cmd, opts.output); err != nil {
				return err
			}
			if opts.to == "" {
				return usageErrorf(cmd, "patches needs --to DIR")
			}
			return runCmd(cmd, opts, runF, orchPatchesRun)
		},
	}
	cmd.Flags().StringVar(&opts.to, "to", "", "directory to write <task>.patch files into (created if missing)")
	addOutputFlag(cmd, &opts.output)
	return cmd
}

// orchPatchesRun writes the patches of the run's succeeded tasks.
func orchPatchesRun(ctx context.Context, opts *orchPatchesOptions) error {
	f := opts.f
	_, run, err := runStatus(ctx, f, opts.run)
	if err != nil {
		return err
	}
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	records := dispatch.NewRecords(h.DB, nil, f.Now)
	dir, err := openOutDir(opts.to)
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
		r, err := records.Get(ctx, t.DispatchID)
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
	if opts.output == formatJSON {
		if out == nil {
			out = []api.Patch{}
		}
		return writeJSON(f.IO.Out, out)
	}
	return printTable(f.IO, []string{"TASK", "DISPATCH", "PATCH"}, rows)
}
