// Package apply is `agora apply`: it reconciles the catalog with an agora-manifest.yaml
// (internal/deploy plans it) in one transaction, all or nothing, through the privileged
// writer. Deploy time only: people and reviewed CI.
package apply

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog/ccimport"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/cli/catalogcmd"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/deploy"
)

type applyOptions struct {
	f      *cmdutil.Factory
	file   string
	dryRun bool
	prune  bool
	output string
}

// applyResult is the JSON shape of apply.
type applyResult struct {
	DryRun  bool               `json:"dry_run"`
	Applied bool               `json:"applied"`
	Changes []provision.Change `json:"changes"`
	// Imported are the Claude Code subagent files the manifest's import: entries read, each
	// with its tool-by-tool mapping (absent without imports).
	Imported []catalogcmd.ImportedSubagent `json:"imported,omitempty"`
}

func NewCmd(f *cmdutil.Factory, runF func(*applyOptions) error) *cobra.Command {
	opts := &applyOptions{f: f}
	cmd := &cobra.Command{
		Use:   "apply -f agora-manifest.yaml [--dry-run] [--prune]",
		Short: "Reconcile the catalog with a manifest, all or nothing",
		Long: `Declare capabilities, subagents, env bundles and workspaces in one file and make the catalog match it.

apply prints a plan (+ create, ~ new version, = unchanged, - retire) and then carries it
out in ONE transaction: either every change lands, with its audit entry, or none does.
Applying the same manifest again reports nothing to do. With --prune, active names that the
manifest does not declare are retired (they stay in history and in the audit log).

  version: 1
  capabilities:
    - name: repo-tools
      from: ./capabilities/repo-tools      # relative to the manifest
  subagents:
    - name: fixer
      runtime: exec
      command: [sh, -c, "make fix"]
      capabilities: [repo-tools]           # may name capabilities declared above
  envs:
    - name: ci
      values: {LOG_LEVEL: debug}
      secrets:
        GITHUB_TOKEN: {from_env: GITHUB_TOKEN}
        DEPLOY_KEY: {from_file: ./secrets/deploy.key}
      bind:                                # GITHUB_TOKEN never enters the sandbox
        GITHUB_TOKEN:
          hosts: [api.github.com, github.com]
          headers: [X-Api-Key]             # besides Authorization; optional
  workspaces:
    - name: app
      repo: /srv/src/app                   # a git repository on this host
      revisions: [main, "release/*"]       # what dispatches and plans may ask for
      default_revision: main
  import:                                  # Claude Code subagent files, as
    - .claude/agents                       # 'agora subagent import' reads them
    - {from: ./more-agents, default_tools: "Read, Grep, Glob"}

Secrets are read from their sources at apply time; a manifest never holds a secret value.
A bound secret (bind:) reaches the sandbox only as a placeholder; the egress proxy swaps in
the value for requests to its hosts alone (see agora env register --help). The plan shows
each binding a change adds (bind), moves (rebind) or removes (unbind).

Each import: entry registers its files' subagents and their NAME.claude-tools capabilities,
printing the mapping of every tool first (see agora subagent import --help).

A manifest with problems changes nothing: every problem is reported at once, the manifest's
own (names, fields) and each entry's (missing files, credentials, unknown capabilities)
together, each with its line and path (subagents[2]: ...); the first 100 are listed, then
how many more there are.`,
		Example: `  agora apply -f agora-manifest.yaml --dry-run
  agora apply -f agora-manifest.yaml --prune --output json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.file == "" {
				return cmdutil.UsageErrorf(cmd, "-f FILE is required")
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, applyRun)
		},
	}
	cmd.Flags().StringVarP(&opts.file, "file", "f", "", "the manifest to apply (required)")
	cmd.Flags().BoolVar(&opts.dryRun, "dry-run", false, "print the plan and change nothing")
	cmd.Flags().BoolVar(&opts.prune, "prune", false, "retire active names the manifest does not declare")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func applyRun(ctx context.Context, opts *applyOptions) error {
	f := opts.f
	w, err := f.Writer(ctx)
	if err != nil {
		return err
	}
	// The manifest's own problems and every entry's, in one report.
	src, pendings, err := deploy.Check(ctx, opts.file, w, f.Getenv)
	if err != nil {
		return err
	}
	changes, err := w.Plan(ctx, pendings, opts.prune)
	if err != nil {
		return err
	}
	res := applyResult{DryRun: opts.dryRun, Changes: changes}
	if sets := src.Imports(); len(sets) > 0 {
		var skipped []ccimport.Skipped
		res.Imported, skipped = catalogcmd.ImportedOf(sets...)
		if opts.output != cmdutil.FormatJSON {
			catalogcmd.PrintImport(f.IO.Out, catalogcmd.ImportResult{Subagents: res.Imported, Skipped: skipped})
		}
	}
	if opts.output != cmdutil.FormatJSON {
		catalogcmd.PrintPlan(f, changes)
	}
	if !opts.dryRun && catalogcmd.HasWork(changes) {
		done, err := w.Apply(ctx, f.Actor(), "register", changes, src.Summary(f.Actor(), changes, opts.prune))
		if err != nil {
			return err
		}
		res.Applied, res.Changes = true, done
	}
	if opts.output == cmdutil.FormatJSON {
		if res.Changes == nil {
			res.Changes = []provision.Change{}
		}
		return cmdutil.WriteJSON(f.IO.Out, res)
	}
	switch {
	case !catalogcmd.HasWork(changes):
		fmt.Fprintln(f.IO.Out, "Nothing to do: the catalog already matches the manifest.")
	case opts.dryRun:
		fmt.Fprintln(f.IO.Out, "Dry run: nothing was changed.")
	default:
		fmt.Fprintln(f.IO.Out, "Applied.")
	}
	return nil
}
