package subagent

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog/ccimport"
	"github.com/agora-dev/agora/internal/cli/catalogcmd"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

type subagentImportOptions struct {
	f            *cmdutil.Factory
	root         string
	dryRun       bool
	defaultTools string
	defaults     []ccimport.Tool
	allow        []string
	output       string
}

func newSubagentImportCmd(f *cmdutil.Factory, runF func(*subagentImportOptions) error) *cobra.Command {
	opts := &subagentImportOptions{f: f}
	cmd := &cobra.Command{
		Use:   "import DIR|FILE.md [--dry-run] [--default-tools TOOLS]",
		Short: "Import Claude Code subagent files as claude-code subagents",
		Long: `Import the Claude Code subagents of DIR (a .claude/agents directory, read recursively as
Claude Code reads it) or of one .md file. Each file opens with YAML front matter:

  ---
  name: code-reviewer                 # the subagent's name in agora
  description: "Reviews diffs."       # a literal \n is a newline, as in Claude Code
  tools: Read, Grep, Glob, Bash(git diff:*)
  model: sonnet                       # sonnet, opus, haiku, fable, inherit or a model id
  color: blue                         # display only: ignored
  ---
  You review diffs. ...               # the body is the system prompt

Each becomes a claude-code subagent NAME holding one capability, NAME.claude-tools, whose
grant is what its tools map to; the mapping is printed tool by tool:

  Read -> read_file             Edit, Write -> write_file      Glob -> list_files
  Grep -> search_files          Bash -> run_command, any line  TodoWrite -> (always there)
  Bash(git status) -> the command "git status"
  Bash(git diff:*), Bash(git diff *) -> "git diff **"
  WebFetch(domain:HOST) -> http_fetch with egress HOST
  Read(./**), Edit(./**) -> read_file, write_file (a grant has no narrower paths)

A tool agora cannot grant exactly is refused, naming it: a bare WebFetch (any host),
WebSearch, Agent/Task, AskUserQuestion, MCP tools (mcp__server__tool), paths other than ./**,
wildcards inside a command, words a shell would interpret. A file without tools (or with an
empty one) gets every tool in Claude Code, which agora cannot express: it is refused unless
--default-tools gives its tools. Front matter fields agora cannot honour (permissionMode,
hooks, mcpServers, disallowedTools, ...) are refused by name; inherit and no model mean
claude's default model.

The import is all or nothing: every problem of every file is listed with its file and line,
and one problem registers nothing. A name used twice is refused, and so is a subagent or
capability of the same name that was not made by an import. Each version is registered and
audited like any registration (catalog.subagent.import, catalog.capability.import), with a
catalog.import entry listing the files' digests; importing the same files again changes
nothing. Files without front matter (a README.md) are skipped, as Claude Code skips them.

Imports are deploy time: they are never offered over MCP. A manifest can import too:
'import: [.claude/agents]' (see agora apply --help).`,
		Example: `  agora subagent import .claude/agents --dry-run
  agora subagent import .claude/agents
  agora subagent import ~/.claude/agents/reviewer.md --default-tools 'Read, Grep, Glob'`,
		Args: cmdutil.ExactArgs(1, "DIR or FILE.md"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			opts.root = args[0]
			if cmd.Flags().Changed("default-tools") {
				d, err := ccimport.ParseDefaultTools(opts.defaultTools)
				if err != nil {
					return cmdutil.UsageErrorf(cmd, "--default-tools: %v", err)
				}
				opts.defaults = d
			}
			return cmdutil.RunCmd(cmd, opts, runF, subagentImportRun)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.dryRun, "dry-run", false, "print the mapping and the plan; change nothing")
	fl.StringVar(&opts.defaultTools, "default-tools", "", "tools, as a subagent file writes them, for files that list none (default: refuse them)")
	fl.StringSliceVar(&opts.allow, "allow-credential-pattern", nil, "credential scanner pattern to ignore (recorded on the versions)")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func subagentImportRun(ctx context.Context, opts *subagentImportOptions) error {
	f := opts.f
	set, err := ccimport.Load(opts.root, opts.defaults)
	if err != nil {
		return err
	}
	w, err := f.Writer(ctx)
	if err != nil {
		return err
	}
	pendings, err := set.Prepare(ctx, w, nil, cmdutil.SplitList(opts.allow))
	if err != nil {
		return err
	}
	changes, err := w.Plan(ctx, pendings, false)
	if err != nil {
		return err
	}
	res := catalogcmd.ImportResult{DryRun: opts.dryRun, Changes: changes}
	res.Subagents, res.Skipped = catalogcmd.ImportedOf(set)
	if opts.output != cmdutil.FormatJSON {
		catalogcmd.PrintImport(f.IO.Out, res)
		catalogcmd.PrintPlan(f, changes)
	}
	if !opts.dryRun && catalogcmd.HasWork(changes) {
		done, err := w.Apply(ctx, f.Actor(), "import", changes, set.Summary(f.Actor(), changes))
		if err != nil {
			return err
		}
		res.Applied, res.Changes = true, done
	}
	if opts.output == cmdutil.FormatJSON {
		return cmdutil.WriteJSON(f.IO.Out, res)
	}
	switch {
	case !catalogcmd.HasWork(changes):
		fmt.Fprintln(f.IO.Out, "Nothing to do: the catalog already holds these subagents.")
	case opts.dryRun:
		fmt.Fprintln(f.IO.Out, "Dry run: nothing was changed.")
	default:
		fmt.Fprintln(f.IO.Out, "Imported.")
	}
	return nil
}
