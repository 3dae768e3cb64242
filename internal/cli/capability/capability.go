// Package capability is `agora capability`: register, list, show and retire capabilities (the
// grants a subagent runs under), and suggest one from what dispatches tried
// (internal/grant/suggest); catalogcmd holds what the catalog's nouns share.
package capability

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/cli/catalogcmd"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/grant"
)

func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capability",
		Short: "Register and inspect capabilities (what a worker may do)",
		Long: `A capability is a directory of files plus an optional capability.yaml that declares what
it grants: tools, command allow-patterns, egress hosts, a setup script and network access.
Everything not granted is denied. Versions are immutable and content-addressed.

In a dispatch a capability's files are mounted read-only at /agora/capabilities/NAME
($AGORA_CAPABILITIES/NAME), outside the workspace, so they never replace the repository's
files; only those its overlay: patterns name are placed in the workspace as well.`,
	}
	cmd.AddCommand(
		newCapabilityRegisterCmd(f, nil),
		catalogcmd.NewListCmd(f, nil, catalog.KindCapability, catalogcmd.ListColumns{
			Headers: []string{"NAME", "DIGEST", "FILES", "REGISTERED", "DESCRIPTION"},
			Row: func(f *cmdutil.Factory, v catalog.Version) []string {
				return []string{v.Name, cmdutil.FmtDigest(f.IO, v.Digest), strconv.Itoa(v.Meta.FileCount),
					cmdutil.FmtTime(f.IO, f.Now(), v.RegisteredAt), cmdutil.Truncate(v.Meta.Description, 60)}
			},
		}),
		catalogcmd.NewShowCmd(f, nil, catalog.KindCapability, "Show a capability's grants and files", capabilityShowRun),
		catalogcmd.NewHistoryCmd(f, nil, catalog.KindCapability),
		newCapabilitySuggestCmd(f, nil),
	)
	return cmd
}

type capabilityRegisterOptions struct {
	f      *cmdutil.Factory
	name   string
	from   string
	allow  []string
	output string
}

func newCapabilityRegisterCmd(f *cmdutil.Factory, runF func(*capabilityRegisterOptions) error) *cobra.Command {
	opts := &capabilityRegisterOptions{f: f}
	cmd := &cobra.Command{
		Use:   "register NAME --from DIR",
		Short: "Register a directory as a new version of a capability",
		Long: `Register the files under DIR as the latest version of capability NAME.

DIR may hold a capability.yaml:

  description: what this capability is for
  tools: [read_file, write_file, run_command]   # from the tool registry
  commands: ["go test **", "make lint"]         # argv allow-patterns: * one arg, ** the rest
  egress: [api.github.com, "*.example.com"]     # hosts the worker may reach via the gateway
  setup: setup.sh                               # run inside the sandbox before the agent,
                                                # from the mount, in the workspace
  network: none                                 # none (default) or egress
  overlay: [".claude/**", CLAUDE.md]            # files also placed in the workspace
  approve: [write_file, {command: "git push *"}] # calls a person must approve first

Overlay patterns are relative paths; * matches within one path segment, a ** segment any
number of them. A dispatch whose repository already has an overlaid path (or whose two
capabilities overlay the same one) is refused before it is recorded, naming both; the
overlaid files never appear in the patch, whatever the agent does to them.

An approve command rule holds every call agora reads as that operation (global options,
aliases, wrappers such as env and sh -c included) and every call it cannot read; what it
cannot see (a push from a Makefile's recipe, git's hooks and config files, an option spelt
otherwise) is printed as notes on registration and by 'agora capability show'.

Every file is scanned for credentials; a hit refuses the registration. Registering content
identical to the latest version does nothing; content equal to an older version makes it the
latest again. The total size is capped (catalog.capability_max_size, default 50 MiB).`,
		Example: `  agora capability register repo-tools --from ./capabilities/repo-tools`,
		Args:    cmdutil.ExactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.name = args[0]
			if opts.from == "" {
				return cmdutil.UsageErrorf(cmd, "--from DIR is required")
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, capabilityRegisterRun)
		},
	}
	cmd.Flags().StringVar(&opts.from, "from", "", "directory holding the capability's files (required)")
	cmd.Flags().StringSliceVar(&opts.allow, "allow-credential-pattern", nil,
		"credential scanner pattern to ignore for this registration (recorded on the version); repeatable")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

// capabilityShow is the JSON shape of 'capability show': the list's item and
// the files.
type capabilityShow struct {
	catalogcmd.CapabilityListItem
	Files []capabilityFile `json:"files"`
	// ApproveNotes say what the capability's approve rules cannot see.
	ApproveNotes []string `json:"approve_notes,omitempty"`
}

type capabilityFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Mode   string `json:"mode"`
	Target string `json:"symlink_target,omitempty"`
}

func capabilityRegisterRun(ctx context.Context, opts *capabilityRegisterOptions) error {
	return catalogcmd.RegisterRun(ctx, opts.f, opts.output, func(w *provision.Writer) (*provision.Pending, error) {
		return w.PrepareCapability(opts.name, opts.from, cmdutil.SplitList(opts.allow))
	})
}

func capabilityShowRun(ctx context.Context, opts *catalogcmd.RefOptions) error {
	_, v, data, err := catalogcmd.ResolveContent(ctx, opts)
	if err != nil {
		return err
	}
	files, err := catalog.ReadArchive(data, catalog.Limits{MaxTotalSize: 1 << 40})
	if err != nil {
		return err
	}
	out := capabilityShow{CapabilityListItem: catalogcmd.NewCapabilityListItem(v), Files: []capabilityFile{}}
	if v.Meta.CapabilityDoc != nil {
		out.ApproveNotes = grant.ApproveNotes(v.Meta.CapabilityDoc.Set)
	}
	for _, fl := range files {
		out.Files = append(out.Files, capabilityFile{Path: fl.Path, Size: fl.Size, Mode: fmt.Sprintf("%04o", fl.Mode), Target: fl.LinkTarget})
	}
	return cmdutil.Emit(opts.F.IO, opts.Output, out, func(out capabilityShow) error {
		var total int64
		for _, fl := range files {
			total += fl.Size
		}
		printCapability(opts.F.IO.Out, v, out, total)
		return nil
	})
}

// printCapability writes a capability for people; total is the size of its files.
func printCapability(w io.Writer, v catalog.Version, out capabilityShow, total int64) {
	g := v.Meta.CapabilityDoc
	fmt.Fprintf(w, "name:        %s\n", v.Name)
	fmt.Fprintf(w, "digest:      %s\n", v.Digest)
	fmt.Fprintf(w, "registered:  %s by %s\n", v.RegisteredAt.UTC().Format("2006-01-02T15:04:05Z"), v.RegisteredBy)
	fmt.Fprintf(w, "description: %s\n", cmdutil.OrDash(v.Meta.Description))
	if g != nil {
		fmt.Fprintf(w, "tools:       %s\n", cmdutil.OrDash(strings.Join(g.Tools, ", ")))
		fmt.Fprintf(w, "commands:    %s\n", cmdutil.OrDash(cmdutil.QuoteAll(g.Commands)))
		fmt.Fprintf(w, "egress:      %s\n", cmdutil.OrDash(strings.Join(cmdutil.RuleStrings(g.Egress), ", ")))
		fmt.Fprintf(w, "approve:     %s\n", cmdutil.OrDash(approveStrings(g.Approve)))
		fmt.Fprintf(w, "network:     %s\n", g.Network)
		fmt.Fprintf(w, "setup:       %s\n", cmdutil.OrDash(g.Setup))
		fmt.Fprintf(w, "overlay:     %s\n", cmdutil.OrDash(cmdutil.QuoteAll(g.Overlay)))
	}
	if len(out.ApproveNotes) > 0 {
		fmt.Fprintln(w, "approve rules cannot see:")
		catalogcmd.PrintApproveNotes(w, "  ", out.ApproveNotes)
	}
	if len(v.Meta.AllowedCredentialPatterns) > 0 {
		fmt.Fprintf(w, "scanner opt-outs: %s\n", strings.Join(v.Meta.AllowedCredentialPatterns, ", "))
	}
	fmt.Fprintf(w, "files (%d, %d bytes):\n", len(out.Files), total)
	for _, fl := range out.Files {
		if fl.Target != "" {
			fmt.Fprintf(w, "  %s -> %s\n", fl.Path, fl.Target)
		} else {
			fmt.Fprintf(w, "  %s  %s  %d\n", fl.Mode, fl.Path, fl.Size)
		}
	}
}

// approveStrings is approve rules as people read them, comma-separated.
func approveStrings(rules []grant.ApproveRule) string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.String()
	}
	return strings.Join(out, ", ")
}
