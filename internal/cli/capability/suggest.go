package capability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/runread"
	"github.com/agora-dev/agora/internal/grant/suggest"
	"github.com/agora-dev/agora/internal/orch/client"
)

type capabilitySuggestOptions struct {
	f      *cmdutil.Factory
	from   []string
	run    string
	narrow bool
	out    string
	force  bool
	output string
}

// capabilitySuggestResult is the JSON shape of 'capability suggest': the proposal, the
// capability.yaml it would write and where it wrote it ("" without --out).
type capabilitySuggestResult struct {
	Subagent string `json:"subagent"`
	*suggest.Proposal
	Unended        []string `json:"unended"`
	CapabilityYAML string   `json:"capability_yaml"`
	Wrote          string   `json:"wrote,omitempty"`
}

func newCapabilitySuggestCmd(f *cmdutil.Factory, runF func(*capabilitySuggestOptions) error) *cobra.Command {
	opts := &capabilitySuggestOptions{f: f}
	cmd := &cobra.Command{
		Use:   "suggest (--from DISPATCH... | --run RUN) [--narrow] [--out DIR [--force]]",
		Short: "Propose a capability from what dispatches did (never registers it)",
		Long: `Read what some dispatches of one subagent actually did and propose the grant that lets
them do it: tools, command patterns and egress rules (host, port, methods and paths), as a
capability.yaml 'agora capability register' takes as it is. The proposal is shown as a
plain-language list of what is new ("runs ` + "`go test ./...`" + `", "POSTs to
api.github.com:443/repos/acme/x") and a diff against the subagent's current grant. Nothing is
registered: a person reviews the file and registers it.

The evidence is each dispatch's audit entries: learn mode's would-deny entries (run the
dispatches with 'agora dispatch run --learn' to record what the grant refused instead of
refusing it), the egress proxy's connections, the worker's tool decisions, and the command an
exec subagent runs. Only what the proxy let through is proposed: a connection the dispatch's
grant admitted or, in a learn dispatch, a host egress.learn_hosts admitted (agora.yaml) and
the requests made to it. What the proxy refused (a connection, a request), in any dispatch,
is listed apart under "not proposed: the agent tried it, the proxy refused it" (-o json:
proxy_refused) and never written to capability.yaml: a host the agent tried is not a host
the work used. Agents wrote the evidence, so it is read as hostile:

  - commands are proposed word for word, glob characters escaped (an argument "*" stays the
    literal "*"); a word with spaces, control or non-ASCII bytes is refused, not proposed;
  - hosts are proposed exactly, with the port seen: never "*.domain" or an IP range;
  - paths with "..", "%", empty segments or control bytes are refused;
  - what is shown is plain ASCII: a name cannot move your cursor or forge a line.

Generalisation is small and stated: three or more commands of one program that differ only
in their last argument, under one directory, become "PROGRAM ARGS DIR/[^./]*" (one name in DIR, never "..": never for shells,
interpreters or wrappers such as env and xargs); three or more paths of one host, port and
method under one parent become that parent as a prefix (never "/"). --narrow turns both off:
the tightest grant that admits exactly the evidence.

What the audit does not hold cannot be proposed from evidence: an allowed tool call's
arguments are kept only as a hash, and the proxy records an allowed request's method and path
only in a learn dispatch. Such calls keep the patterns and rules of the dispatch's grant that
admitted them (narrowed to the host and port seen), marked "kept".

--out DIR writes DIR/capability.yaml; DIR must not exist (it is created fresh, and a symlink
is never followed) unless --force, which replaces the capability.yaml of a directory holding
nothing else. Without --out nothing is written. -o json prints the proposal, the diff, the
refusals (proxy_refused and refused) and the file's text as one document.

This is a deploy-time command of the CLI: no MCP tool can suggest, learn or register.`,
		Example: `  agora capability suggest --from 20261124T0901-ab12,20261124T0902-cd34 --out ./caps/learned
  agora capability suggest --run nightly --narrow -o json
  agora capability register learned --from ./caps/learned`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.from = cmdutil.SplitList(opts.from)
			switch {
			case len(opts.from) == 0 && opts.run == "":
				return cmdutil.UsageErrorf(cmd, "name the evidence: --from DISPATCH... or --run RUN")
			case len(opts.from) > 0 && opts.run != "":
				return cmdutil.UsageErrorf(cmd, "--from and --run cannot be used together")
			case opts.force && opts.out == "":
				return cmdutil.UsageErrorf(cmd, "--force replaces the capability.yaml of --out DIR; give --out")
			}
			if err := cmdutil.CheckOutput(cmd, opts.output); err != nil {
				return err
			}
			return cmdutil.RunCmd(cmd, opts, runF, capabilitySuggestRun)
		},
	}
	cmd.Flags().StringSliceVar(&opts.from, "from", nil, "dispatch ids to read (repeatable, or comma-separated)")
	cmd.Flags().StringVar(&opts.run, "run", "", "a run (id or name) whose every dispatch is read")
	cmd.Flags().BoolVar(&opts.narrow, "narrow", false, "propose literals only: no command or path is generalised")
	cmd.Flags().StringVar(&opts.out, "out", "", "write DIR/capability.yaml (DIR is created; it must not exist)")
	cmd.Flags().BoolVar(&opts.force, "force", false, "with --out: replace the capability.yaml of an existing DIR that holds nothing else")
	cmdutil.AddOutputFlag(cmd, &opts.output)
	return cmd
}

func capabilitySuggestRun(ctx context.Context, opts *capabilitySuggestOptions) error {
	f := opts.f
	ids := opts.from
	if opts.run != "" {
		var err error
		if ids, err = runDispatches(ctx, f, opts.run); err != nil {
			return err
		}
	}
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	g, err := suggest.Source{DB: h.DB, Catalog: view.New(h.DB, h.Blobs)}.Gather(ctx, ids)
	if err != nil {
		return err
	}
	p, err := suggest.Propose(g.Evidence, g.Current, suggest.Options{Narrow: opts.narrow})
	if err != nil {
		return err
	}
	yaml, err := p.YAML()
	if err != nil {
		return err
	}
	res := capabilitySuggestResult{Subagent: g.Subagent, Proposal: p, Unended: g.Unended, CapabilityYAML: string(yaml)}
	if res.Unended == nil {
		res.Unended = []string{}
	}
	if opts.out != "" {
		if err := suggest.WriteDir(opts.out, yaml, opts.force); err != nil {
			return err
		}
		res.Wrote = filepath.Join(opts.out, "capability.yaml")
	}
	return cmdutil.Emit(f.IO, opts.output, res, func(res capabilitySuggestResult) error {
		printSuggestion(f.IO.Out, res)
		if res.Wrote != "" {
			fmt.Fprintf(f.IO.ErrOut, "agora: wrote %s; review it, then: agora capability register NAME --from %s\n", res.Wrote, opts.out)
		} else {
			fmt.Fprintln(f.IO.ErrOut, "agora: nothing written; --out DIR writes the capability.yaml")
		}
		return nil
	})
}

// runDispatches returns every dispatch of run ref, from serve or, when it is not running, a
// read-only snapshot of orch.db.
func runDispatches(ctx context.Context, f *cmdutil.Factory, ref string) ([]string, error) {
	_, r, err := runread.Status(ctx, f, ref)
	if errors.Is(err, client.ErrNotRunning) {
		r, err = runread.Snapshot(ctx, f, ref, err)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range r.Tasks {
		ids = append(ids, t.Dispatches...)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("run %s has no dispatches yet", r.ID)
	}
	return ids, nil
}

// printSuggestion writes the proposal for people. Every line is ASCII: the items are built
// from checked evidence and the refusals are quoted (suggest.Show); plain() is the backstop.
func printSuggestion(w io.Writer, res capabilitySuggestResult) {
	p := res.Proposal
	fmt.Fprintf(w, "proposed for subagent %s: %s\n", plain(res.Subagent), plain(p.String()))
	var added, kept []suggest.Item
	for _, it := range p.Items {
		if it.New {
			added = append(added, it)
		} else {
			kept = append(kept, it)
		}
	}
	section(w, "new (not in the current grant):", len(added), func() {
		for _, it := range added {
			fmt.Fprintf(w, "  + %s\n", plain(it.Text))
		}
	})
	section(w, "already granted:", len(kept), func() {
		for _, it := range kept {
			fmt.Fprintf(w, "    %s\n", plain(it.Text))
		}
	})
	refusals(w, "not proposed: the agent tried it, the proxy refused it:", p.ProxyRefused, p.ProxyRefusedMore,
		"'agora audit log --kind net.connect -o json' and --kind net.request list every one")
	refusals(w, "not proposed:", p.Refused, p.RefusedMore, "'agora audit log -o json' lists every entry")
	notes := p.Notes
	if len(res.Unended) > 0 {
		notes = append(notes, "not ended yet, so their evidence may be partial: "+plain(strings.Join(res.Unended, ", ")))
	}
	section(w, "notes:", len(notes), func() {
		for _, n := range notes {
			fmt.Fprintf(w, "  - %s\n", plain(n))
		}
	})
	fmt.Fprintf(w, "diff against the current grant of %s:\n", plain(res.Subagent))
	if len(p.Diff.Added)+len(p.Diff.Removed) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, a := range p.Diff.Added {
		fmt.Fprintf(w, "  + %s\n", plain(a))
	}
	for _, r := range p.Diff.Removed {
		fmt.Fprintf(w, "  - %s\n", plain(r))
	}
}

// refusals writes a section of evidence not proposed, and why; past the ones listed, how many
// more and where each is (an agent can try many decoys first, so one that matters may be
// among those counted).
func refusals(w io.Writer, head string, rs []suggest.Refusal, more int, where string) {
	section(w, head, len(rs)+more, func() {
		for _, r := range rs {
			times := ""
			if r.Count > 1 {
				times = fmt.Sprintf(", %d times", r.Count)
			}
			fmt.Fprintf(w, "  - %s %s: %s (dispatch %s%s)\n", r.Kind, plain(r.Item), plain(r.Reason), plain(r.Dispatch), times)
		}
		if more > 0 {
			fmt.Fprintf(w, "  - and %d more, not listed here (%s)\n", more, where)
		}
	})
}

func section(w io.Writer, head string, n int, body func()) {
	if n == 0 {
		return
	}
	fmt.Fprintln(w, head)
	body()
}

// plain replaces every byte that is not printable ASCII with '?'.
func plain(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}
