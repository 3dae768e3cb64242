package orch

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/branch"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/outdir"
	"github.com/agora-dev/agora/internal/cli/runread"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

type orchPatchesOptions struct {
	f      *cmdutil.Factory
	run    string
	to     string
	branch string
	// includeLearn lets a learn dispatch's patch into --branch/--combined (docs/learn.md).
	includeLearn bool
	repo         string
	combined     bool
	skip         []string
	output       string
}

func newOrchPatchesCmd(f *cmdutil.Factory, runF func(*orchPatchesOptions) error) *cobra.Command {
	opts := &orchPatchesOptions{f: f}
	cmd := &cobra.Command{
		Use:   "patches RUN (--to DIR | --branch NAME | --combined)",
		Short: "Write a run's patches into a directory, a git branch or one patch",
		Long: `Collect the patch of each task that succeeded, from its last attempt's dispatch. Review
them: agents wrote them.

--to DIR writes DIR/<task>.patch (git apply on the run's revision); tasks that changed
nothing get no file. A stacked task's patch (base: in its plan) was made on top of its
bases' work: apply it after theirs, in the order its BASE column (base in JSON) lists them. Patches are written 0600 (DIR, if created, 0700). Nothing already in
DIR is followed or overwritten: a symbolic link or a different file where a patch goes is an
error, and a file with the same patch is left as it is, so a rerun succeeds.

--branch NAME creates branch NAME in the run's repository (its --repo, or its workspace's
repository; --repo PATH names another clone that has the run's commit) with one commit per
succeeded task that changed something, starting from the commit the run worked on. The order is the
dependency order: each next commit is, of the tasks whose dependencies are all placed, the
one with the smallest task id, so the same run always gives the same branch; a stacked
task's commit comes after its bases', so the branch's tip holds the whole chain. Each patch is
applied with a three-way merge onto the commits before it. The author is the subagent and
its digest (name@sha256:HEX <name@subagent.agora.invalid>), the committer agora
<agora@agora.invalid>; the message names the task, dispatch and run as Agora-Task,
Agora-Dispatch, Agora-Run and Agora-Subagent trailers.

Only git's object store and the new branch are written: the working tree, the index, HEAD
and the current branch stay as they are, nothing is pushed, and nothing the repository or
your git configuration names (hooks, fsmonitor, merge, filter or diff drivers, gpg) runs:
the merges happen in a private git directory that shares only the object store. An existing
branch is refused, never moved: pick another name or delete it (git branch -D NAME). A name
git would not take as a branch (a space, '..', '@{', a component ending in .lock, a leading
'-') is refused before git is asked. A task whose patch changes nothing on top of the
commits before it (two tasks made the same edit) gets no commit, and the output says so,
one line per such task. A task whose patch conflicts with the ones before it stops
everything: no branch is created, and the error names the task and the files, and how to
go on: --skip TASK (repeatable) makes the branch (or --combined's patch) without that
task's work; a task another one is stacked on is skipped only with it.

--combined prints one patch of all of them (the same three-way merges), from the run's
commit to the result.`,
		Example: `  agora orch patches nightly-fixes --to ./review && git apply --check review/*.patch
  agora orch patches nightly-fixes --branch agora/nightly-fixes
  git log --stat --format='%h %an%n%s%n%(trailers)' main..agora/nightly-fixes
  agora orch patches nightly-fixes --branch agora/nightly-fixes --repo ~/src/app-clone
  agora orch patches nightly-fixes --branch agora/nightly-fixes --skip flaky-fix
  agora orch patches nightly-fixes --combined > nightly.patch && git apply --check nightly.patch`,
		Args: cmdutil.ExactArgs(1, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.run = args[0]
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			n := 0
			for _, set := range []bool{opts.to != "", opts.branch != "", opts.combined} {
				if set {
					n++
				}
			}
			if n != 1 {
				return cmdutil.UsageErrorf(cmd, "patches needs exactly one of --to DIR, --branch NAME or --combined")
			}
			if opts.repo != "" && opts.to != "" {
				return cmdutil.UsageErrorf(cmd, "--repo goes with --branch or --combined")
			}
			if len(opts.skip) > 0 && opts.to != "" {
				return cmdutil.UsageErrorf(cmd, "--skip goes with --branch or --combined")
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchPatchesRun)
		},
	}
	cmd.Flags().StringVar(&opts.to, "to", "", "directory to write <task>.patch files into (created if missing)")
	cmd.Flags().StringVar(&opts.branch, "branch", "", "create this git branch with one commit per task (e.g. agora/RUN)")
	cmd.Flags().BoolVar(&opts.combined, "combined", false, "print one patch of every task's changes")
	cmd.Flags().StringVar(&opts.repo, "repo", "", "the repository for --branch/--combined (default: the run's)")
	cmd.Flags().StringArrayVar(&opts.skip, "skip", nil, "leave this task's work out of --branch/--combined (repeatable)")
	cmd.Flags().BoolVar(&opts.includeLearn, "include-learn", false, "let learn dispatches' patches into --branch/--combined (refused without it: docs/learn.md)")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

// orchPatchesRun writes the patches of the run's succeeded tasks.
func orchPatchesRun(ctx context.Context, opts *orchPatchesOptions) error {
	f := opts.f
	_, run, err := runread.Status(ctx, f, opts.run)
	if err != nil {
		return err
	}
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	if opts.branch != "" || opts.combined {
		w, err := branch.RunWork(ctx, h, run, opts.repo, opts.skip, opts.includeLearn)
		if err != nil {
			return err
		}
		if opts.combined {
			return branch.WriteCombined(ctx, f, w)
		}
		return branch.Write(ctx, f, w, opts.branch)
	}
	records := dispatch.NewRecords(h.DB, nil, f.Now)
	dir, err := outdir.Open(opts.to)
	if err != nil {
		return err
	}
	defer dir.Close()
	var out []api.Patch
	var rows [][]string
	stacked, stackOf := false, branch.RunStacks(run.Tasks)
	for _, t := range run.Tasks {
		if t.State != lifecycle.TaskSucceeded || t.DispatchID == "" || t.Judging() {
			continue // a reviewer's or a fix's work is part of the task it judged or fixed
		}
		r, err := records.Get(ctx, t.ProductID())
		if err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
		p := api.Patch{Task: t.ID, DispatchID: r.ID, Base: stackOf(t)}
		stacked = stacked || len(p.Base) > 0
		if r.Result != nil && r.Result.Patch != nil && r.Result.Patch.Size > 0 {
			b, err := h.Blobs.Get(r.Result.Patch.Digest, 0)
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			path, err := dir.WriteFile(t.ID+".patch", b)
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
	if opts.output == cmdutil.FormatJSON {
		if out == nil {
			out = []api.Patch{}
		}
		return cmdutil.WriteJSON(f.IO.Out, out)
	}
	if stacked {
		// A stacked task's patch applies on top of its bases': the column says which, in order.
		for i, p := range out {
			rows[i] = append(rows[i], cmdutil.OrDash(strings.Join(p.Base, ", ")))
		}
		return cmdutil.PrintTable(f.IO, []string{"TASK", "DISPATCH", "PATCH", "BASE"}, rows)
	}
	return cmdutil.PrintTable(f.IO, []string{"TASK", "DISPATCH", "PATCH"}, rows)
}
