// Package subagent is `agora subagent`: register, assign, list, show and retire subagents (an
// agent role: runtime, prompt, capabilities, budget), and import Claude Code subagent files
// (.claude/agents) as subagents with their tools' capability.
package subagent

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/cli/catalogcmd"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/words"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// maxSpecFileSize caps subagent YAML files and prompt files read from disk.
const maxSpecFileSize = 2 << 20

func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "subagent",
		Short: "Register and inspect subagents (agent roles)",
		Long: `A subagent is an agent role: a system prompt, a runtime (` + runtimeList() + `), a
model, and the capabilities it holds, pinned by digest when it is registered.`,
	}
	cmd.AddCommand(
		newSubagentRegisterCmd(f, nil),
		newSubagentAssignCmd(f, nil),
		newSubagentImportCmd(f, nil),
		catalogcmd.NewListCmd(f, nil, catalog.KindSubagent, catalogcmd.ListColumns{
			Headers: []string{"NAME", "DIGEST", "RUNTIME", "CAPABILITIES", "REGISTERED", "DESCRIPTION"},
			Row: func(f *cmdutil.Factory, v catalog.Version) []string {
				return []string{v.Name, cmdutil.FmtDigest(f.IO, v.Digest), v.Meta.Runtime, cmdutil.OrDash(strings.Join(pinNames(v.Meta.Capabilities), ",")),
					cmdutil.FmtTime(f.IO, f.Now(), v.RegisteredAt), cmdutil.Truncate(v.Meta.Description, 50)}
			},
		}),
		catalogcmd.NewShowCmd(f, nil, catalog.KindSubagent, "Show a subagent's runtime, prompt and pinned capabilities", subagentShowRun),
		catalogcmd.NewHistoryCmd(f, nil, catalog.KindSubagent),
	)
	return cmd
}

func pinNames(pins []catalog.Pin) []string {
	names := make([]string, len(pins))
	for i, p := range pins {
		names[i] = p.Name
	}
	return names
}

type subagentRegisterOptions struct {
	f    *cmdutil.Factory
	name string
	spec provision.SubagentSpec

	from         string
	systemPrompt string
	promptFile   string
	runtime      string
	model        string
	command      string
	description  string
	capabilities []string
	allow        []string
	output       string
}

func newSubagentRegisterCmd(f *cmdutil.Factory, runF func(*subagentRegisterOptions) error) *cobra.Command {
	opts := &subagentRegisterOptions{f: f}
	cmd := &cobra.Command{
		Use:   "register NAME (--from FILE.yaml | [flags])",
		Short: "Register a new version of a subagent",
		Long: `Register subagent NAME from a YAML file or from flags (not both).

The YAML file has the same fields as the flags:

  description: fixes failing tests
  runtime: exec                  # exec, claude-code, openai or codex
  model: gpt-4.1                 # openai and claude-code
  system_prompt: |               # or prompt_file: prompt.md (relative to this file)
    You fix failing tests.
  command: [sh, -c, "make fix"]  # exec runtime: the argv to run
  capabilities: [repo-tools]     # names (pinned to their latest digest now) or name@sha256:HEX

The exec runtime's command must match a 'commands' pattern granted by one of the subagent's
capabilities, or dispatches are denied.`,
		Example: `  agora subagent register fixer --from fixer.yaml
  agora subagent register lint --runtime exec --command 'make lint' --capability repo-tools`,
		Args: cmdutil.ExactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			opts.name = args[0]
			var err error
			if opts.spec, err = opts.readSpec(cmd); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, subagentRegisterRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.from, "from", "", "read the subagent from this YAML file")
	fl.StringVar(&opts.systemPrompt, "system-prompt", "", "the system prompt")
	fl.StringVar(&opts.promptFile, "prompt-file", "", "read the system prompt from this file")
	fl.StringVar(&opts.runtime, "runtime", "", "agent runtime: "+runtimeList()+" (default "+runtimes.Default+")")
	fl.StringVar(&opts.model, "model", "", "model name, for the openai, claude-code and codex runtimes")
	fl.StringVar(&opts.command, "command", "", "exec runtime: the command to run, split like a shell would (no expansion)")
	fl.StringVar(&opts.description, "description", "", "one line saying what the subagent is for")
	fl.StringSliceVar(&opts.capabilities, "capability", nil, "capabilities to hold, comma-separated or repeated: NAME or NAME@sha256:HEX")
	fl.StringSliceVar(&opts.allow, "allow-credential-pattern", nil, "credential scanner pattern to ignore (recorded on the version)")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func subagentRegisterRun(ctx context.Context, opts *subagentRegisterOptions) error {
	return catalogcmd.RegisterRun(ctx, opts.f, opts.output, func(w *provision.Writer) (*provision.Pending, error) {
		return w.PrepareSubagent(ctx, opts.name, opts.spec, nil, cmdutil.SplitList(opts.allow))
	})
}

// readSpec makes the subagent of the flags or of the --from file.
func (o *subagentRegisterOptions) readSpec(cmd *cobra.Command) (provision.SubagentSpec, error) {
	inline := []string{"system-prompt", "prompt-file", "runtime", "model", "command", "description", "capability"}
	if o.from != "" {
		for _, name := range inline {
			if cmd.Flags().Changed(name) {
				return provision.SubagentSpec{}, cmdutil.UsageErrorf(cmd, "--from and --%s cannot be used together: put %s in the YAML file", name, name)
			}
		}
		return readSubagentFile(o.from)
	}
	if o.systemPrompt != "" && o.promptFile != "" {
		return provision.SubagentSpec{}, cmdutil.UsageErrorf(cmd, "--system-prompt and --prompt-file cannot be used together")
	}
	spec := provision.SubagentSpec{
		Description: o.description, SystemPrompt: o.systemPrompt, Runtime: o.runtime, Model: o.model,
		Capabilities: cmdutil.SplitList(o.capabilities),
	}
	if o.promptFile != "" {
		b, err := cmdutil.ReadLimited(o.promptFile, maxSpecFileSize)
		if err != nil {
			return spec, err
		}
		spec.SystemPrompt = string(b)
	}
	if o.command != "" {
		argv, err := words.Split(o.command)
		if err != nil {
			return spec, cmdutil.UsageErrorf(cmd, "--command: %v", err)
		}
		spec.Command = argv
	}
	return spec, nil
}

func readSubagentFile(path string) (provision.SubagentSpec, error) {
	var spec provision.SubagentSpec
	src, err := cmdutil.ReadLimited(path, maxSpecFileSize)
	if err != nil {
		return spec, err
	}
	if _, err := strictyaml.Decode(path, src, &spec); err != nil {
		return spec, err
	}
	return spec, resolvePromptFile(&spec, filepath.Dir(path))
}

// resolvePromptFile reads spec.PromptFile (relative to dir) into SystemPrompt.
func resolvePromptFile(spec *provision.SubagentSpec, dir string) error {
	if spec.PromptFile == "" {
		return nil
	}
	if spec.SystemPrompt != "" {
		return fmt.Errorf("system_prompt and prompt_file cannot both be set")
	}
	p := spec.PromptFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	b, err := cmdutil.ReadLimited(p, maxSpecFileSize)
	if err != nil {
		return err
	}
	spec.SystemPrompt, spec.PromptFile = string(b), ""
	return nil
}

type subagentAssignOptions struct {
	f      *cmdutil.Factory
	name   string
	caps   []string
	output string
}

func newSubagentAssignCmd(f *cmdutil.Factory, runF func(*subagentAssignOptions) error) *cobra.Command {
	opts := &subagentAssignOptions{f: f}
	cmd := &cobra.Command{
		Use:   "assign NAME --capability a,b",
		Short: "Make a new version of a subagent with a new capability set",
		Long: `Make a new version of subagent NAME whose capabilities are exactly the ones given (pinned
to their latest digest now, or as NAME@sha256:HEX). Everything else stays as it was. Pass
--capability '' to remove all capabilities.`,
		Args: cmdutil.ExactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.name = args[0]
			if !cmd.Flags().Changed("capability") {
				return cmdutil.UsageErrorf(cmd, "--capability is required (use --capability '' for none)")
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, subagentAssignRun)
		},
	}
	cmd.Flags().StringSliceVar(&opts.caps, "capability", nil, "the new capability set, comma-separated or repeated")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func subagentAssignRun(ctx context.Context, opts *subagentAssignOptions) error {
	f := opts.f
	w, err := f.Writer(ctx)
	if err != nil {
		return err
	}
	c, v, err := w.Assign(ctx, f.Actor(), opts.name, cmdutil.SplitList(opts.caps))
	if err != nil {
		return err
	}
	return catalogcmd.PrintRegistered(f, opts.output, c, v)
}

// subagentShow is the JSON shape of 'subagent show': the list's item and
// what the content holds.
type subagentShow struct {
	catalogcmd.SubagentListItem
	SystemPrompt string   `json:"system_prompt"`
	Command      []string `json:"command"`
	// Grants is the effective grant: the union of the capabilities' grants, the most any
	// dispatch of this version may do.
	Grants grant.Set `json:"grants"`
}

func subagentShowRun(ctx context.Context, opts *catalogcmd.RefOptions) error {
	r, v, data, err := catalogcmd.ResolveContent(ctx, opts)
	if err != nil {
		return err
	}
	doc, err := catalog.ParseSubagentDoc(data)
	if err != nil {
		return err
	}
	grants, err := dispatch.SubagentGrants(ctx, r, doc)
	if err != nil {
		return err
	}
	out := subagentShow{SubagentListItem: catalogcmd.NewSubagentListItem(v), SystemPrompt: doc.SystemPrompt, Command: doc.Command, Grants: grants}
	if out.Command == nil {
		out.Command = []string{}
	}
	return cmdutil.Emit(opts.F.IO, opts.Output, out, func(out subagentShow) error {
		printSubagent(opts.F.IO.Out, v, doc, grants)
		return nil
	})
}

// printSubagent writes a subagent for people.
func printSubagent(w io.Writer, v catalog.Version, doc catalog.SubagentDoc, grants grant.Set) {
	fmt.Fprintf(w, "name:         %s\n", v.Name)
	fmt.Fprintf(w, "digest:       %s\n", v.Digest)
	fmt.Fprintf(w, "registered:   %s by %s\n", v.RegisteredAt.UTC().Format("2006-01-02T15:04:05Z"), v.RegisteredBy)
	fmt.Fprintf(w, "description:  %s\n", cmdutil.OrDash(doc.Description))
	fmt.Fprintf(w, "runtime:      %s\n", doc.Runtime)
	fmt.Fprintf(w, "model:        %s\n", cmdutil.OrDash(doc.Model))
	if !doc.Budget.IsZero() {
		fmt.Fprintf(w, "budget:       %s (a dispatch may narrow it)\n", doc.Budget)
	}
	if len(doc.Command) > 0 {
		fmt.Fprintf(w, "command:      %s\n", cmdutil.QuoteAll(doc.Command))
	}
	fmt.Fprintf(w, "capabilities:\n")
	if len(doc.Capabilities) == 0 {
		fmt.Fprintf(w, "  (none: the worker is granted nothing)\n")
	}
	for _, p := range doc.Capabilities {
		fmt.Fprintf(w, "  %s@%s\n", p.Name, p.Digest)
	}
	fmt.Fprintf(w, "grants (the union of its capabilities; a dispatch may narrow them):\n")
	fmt.Fprintf(w, "  tools:     %s\n", cmdutil.OrNone(grants.Tools))
	fmt.Fprintf(w, "  commands:  %s\n", cmdutil.OrNone(grants.Commands))
	fmt.Fprintf(w, "  egress:    %s\n", cmdutil.OrNone(cmdutil.RuleStrings(grants.Egress)))
	fmt.Fprintf(w, "system prompt:\n")
	if doc.SystemPrompt == "" {
		fmt.Fprintf(w, "  (none)\n")
	}
	if doc.SystemPrompt != "" {
		for _, line := range strings.Split(strings.TrimRight(doc.SystemPrompt, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// runtimeList names every runtime as people read a list: "a, b, c or d".
func runtimeList() string {
	names := runtimes.Names()
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
