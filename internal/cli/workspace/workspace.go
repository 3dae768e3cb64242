// Package workspace is `agora workspace`: register, list, show and retire the host
// repositories a dispatch may name, with the revisions each allows (catalogcmd holds what the
// catalog's nouns share).
package workspace

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/cli/catalogcmd"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workspace",
		Short: "Register and inspect workspaces (repositories dispatches and plans may name)",
		Long: `A workspace names a git repository on this host and the revisions of it that dispatches and
plans may ask for, as ref name patterns ('*' does not cross '/'). An orchestrator (over MCP or
in a plan) names the workspace, never a path: 'agora dispatch run --workspace app@main'.
People register workspaces; every change is on the audit log with its history.`,
	}
	cmd.AddCommand(
		newWorkspaceRegisterCmd(f, nil),
		catalogcmd.NewListCmd(f, nil, catalog.KindWorkspace, catalogcmd.ListColumns{
			Headers: []string{"NAME", "DIGEST", "REVISIONS", "DEFAULT", "REGISTERED", "DESCRIPTION"},
			Row: func(f *cmdutil.Factory, v catalog.Version) []string {
				return []string{v.Name, cmdutil.FmtDigest(f.IO, v.Digest), strings.Join(v.Meta.Revisions, ","), cmdutil.OrDash(v.Meta.DefaultRevision),
					cmdutil.FmtTime(f.IO, f.Now(), v.RegisteredAt), cmdutil.Truncate(v.Meta.Description, 60)}
			},
		}),
		catalogcmd.NewShowCmd(f, nil, catalog.KindWorkspace, "Show a workspace's repository and allowed revisions", workspaceShowRun),
		catalogcmd.NewHistoryCmd(f, nil, catalog.KindWorkspace),
	)
	return cmd
}

type workspaceRegisterOptions struct {
	f      *cmdutil.Factory
	name   string
	spec   provision.WorkspaceSpec
	output string
}

func newWorkspaceRegisterCmd(f *cmdutil.Factory, runF func(*workspaceRegisterOptions) error) *cobra.Command {
	opts := &workspaceRegisterOptions{f: f}
	cmd := &cobra.Command{
		Use:   "register NAME --repo PATH --revision PATTERN... [--default-revision REV]",
		Short: "Register a git repository as a new version of a workspace",
		Long: `Register workspace NAME: the git repository at PATH (its top directory or a bare
repository) and the revisions dispatches may ask of it.

Each --revision is a branch or tag name pattern: main, release/*, v1.* ('*' matches within one
path component, as in path.Match). A dispatch may then name a branch or tag matching one
(refs/heads/R first, then refs/tags/R), or a full commit id reachable from one. Revision
syntax (main~1, HEAD, @{...}) is never accepted. A dispatch that names no revision gets
--default-revision, else the first pattern without a wildcard.

The path is kept in the catalog content only: lists and MCP show the name, the patterns and
the description, never the path.`,
		Example: `  agora workspace register app --repo /srv/src/app --revision main --revision 'release/*'
  agora workspace register docs --repo ~/src/docs --revision 'v*' --default-revision v2.0 --description "the user docs"`,
		Args: cmdutil.ExactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.name = args[0]
			if opts.spec.Repo == "" {
				return cmdutil.UsageErrorf(cmd, "--repo PATH is required")
			}
			if len(opts.spec.Revisions) == 0 {
				return cmdutil.UsageErrorf(cmd, "--revision PATTERN is required (at least one, such as main)")
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, workspaceRegisterRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.spec.Repo, "repo", "", "the git repository on this host (required)")
	fl.StringArrayVar(&opts.spec.Revisions, "revision", nil, "a branch or tag name pattern dispatches may ask for; repeatable (required)")
	fl.StringVar(&opts.spec.DefaultRevision, "default-revision", "", "the revision a dispatch gets when it names none (default: the first pattern without a wildcard)")
	fl.StringVar(&opts.spec.Description, "description", "", "what this workspace is, for the people and models that choose it")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func workspaceRegisterRun(ctx context.Context, opts *workspaceRegisterOptions) error {
	return catalogcmd.RegisterRun(ctx, opts.f, opts.output, func(w *provision.Writer) (*provision.Pending, error) {
		return w.PrepareWorkspace(ctx, opts.name, opts.spec)
	})
}

// workspaceShow is the JSON shape of 'workspace show'. Unlike the version's metadata, it holds
// the repository path: show is for the people who provision the host.
type workspaceShow struct {
	catalogcmd.WorkspaceListItem
	// Repo is the repository's path: host-only, never shown over MCP.
	Repo string `json:"repo"`
}

func workspaceShowRun(ctx context.Context, opts *catalogcmd.RefOptions) error {
	_, v, data, err := catalogcmd.ResolveContent(ctx, opts)
	if err != nil {
		return err
	}
	doc, err := catalog.ParseWorkspaceDoc(data)
	if err != nil {
		return err
	}
	out := workspaceShow{WorkspaceListItem: catalogcmd.NewWorkspaceListItem(v), Repo: doc.Repo}
	return cmdutil.Emit(opts.F.IO, opts.Output, out, func(out workspaceShow) error {
		w := opts.F.IO.Out
		fmt.Fprintf(w, "name:        %s\n", v.Name)
		fmt.Fprintf(w, "digest:      %s\n", v.Digest)
		fmt.Fprintf(w, "registered:  %s by %s\n", v.RegisteredAt.UTC().Format("2006-01-02T15:04:05Z"), v.RegisteredBy)
		fmt.Fprintf(w, "description: %s\n", cmdutil.OrDash(doc.Description))
		fmt.Fprintf(w, "repository:  %s\n", doc.Repo)
		fmt.Fprintf(w, "revisions:   %s\n", strings.Join(doc.Revisions, ", "))
		fmt.Fprintf(w, "default:     %s\n", cmdutil.OrDash(doc.DefaultRevision))
		return nil
	})
}
