package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
)

// registerResult is the JSON shape of register and assign.
type registerResult struct {
	Action  string          `json:"action"`
	Version catalog.Version `json:"version"`
	// ApproveNotes say what the capability's approve rules cannot see.
	ApproveNotes []string `json:"approve_notes,omitempty"`
}

func printRegistered(f *Factory, format string, c provision.Change, v catalog.Version) error {
	if format == formatJSON {
		return writeJSON(f.IO.Out, registerResult{Action: c.Action, Version: v, ApproveNotes: c.ApproveNotes})
	}
	defer printApproveNotes(f.IO.ErrOut, "agora: note: ", c.ApproveNotes)
	switch c.Action {
	case catalog.ActionUnchanged:
		fmt.Fprintf(f.IO.ErrOut, "agora: %s %q unchanged: identical content is already the latest version\n", v.Kind, v.Name)
	case catalog.ActionCreate:
		fmt.Fprintf(f.IO.ErrOut, "agora: registered %s %q\n", v.Kind, v.Name)
	default:
		fmt.Fprintf(f.IO.ErrOut, "agora: registered a new version of %s %q (was %s)\n", v.Kind, v.Name, c.Previous)
	}
	fmt.Fprintln(f.IO.Out, v.Ref())
	return nil
}

// printApproveNotes writes what approve rules cannot see, a line each after prefix.
func printApproveNotes(w io.Writer, prefix string, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "%s%s\n", prefix, n)
	}
}

// registerRun registers what prepare makes of the command line, with its audit entry, and
// prints the outcome: the end of every 'KIND register'.
func registerRun(ctx context.Context, f *Factory, output string, prepare func(*provision.Writer) (*provision.Pending, error)) error {
	w, err := f.Writer(ctx)
	if err != nil {
		return err
	}
	p, err := prepare(w)
	if err != nil {
		return err
	}
	c, v, err := w.Register(ctx, f.Actor(), "register", p)
	if err != nil {
		return err
	}
	return printRegistered(f, output, c, v)
}

// listColumns describes how one kind prints in a table.
type listColumns struct {
	headers []string
	row     func(f *Factory, v catalog.Version) []string
}

type listOptions struct {
	printOptions
	kind catalog.Kind
	cols listColumns
}

func newListCmd(f *Factory, runF func(*listOptions) error, kind catalog.Kind, cols listColumns) *cobra.Command {
	opts := &listOptions{printOptions: printOptions{f: f}, kind: kind, cols: cols}
	return newPrintCmd(&cobra.Command{
		Use:   "list",
		Short: fmt.Sprintf("List the latest version of every %s", kind),
		Long: fmt.Sprintf(`List the latest version of every active %s, sorted by name.
Retired names are left out; 'agora %s history NAME' still shows them.`, kind, cmdNoun(kind)),
		Args: noArgs,
	}, opts, runF, listRun)
}

func listRun(ctx context.Context, opts *listOptions) error {
	f := opts.f
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	vs, err := view.New(h.DB, h.Blobs).List(ctx, opts.kind)
	if err != nil {
		return err
	}
	if opts.output == formatJSON {
		out, err := listJSON(opts.kind, vs)
		if err != nil {
			return err
		}
		return writeJSON(f.IO.Out, out)
	}
	return emit(f.IO, opts.output, vs, func(vs []catalog.Version) error {
		if len(vs) == 0 && f.IO.OutTTY {
			fmt.Fprintf(f.IO.ErrOut, "agora: no %s registered; see 'agora %s register --help'\n", opts.kind.Plural(), cmdNoun(opts.kind))
			return nil
		}
		rows := make([][]string, len(vs))
		for i, v := range vs {
			rows[i] = opts.cols.row(f, v)
		}
		return printTable(f.IO, opts.cols.headers, rows)
	})
}

// refOptions are the options of a command about one catalog name or version: arg.
type refOptions struct {
	printOptions
	kind catalog.Kind
}

func newHistoryCmd(f *Factory, runF func(*refOptions) error, kind catalog.Kind) *cobra.Command {
	opts := &refOptions{printOptions: printOptions{f: f}, kind: kind}
	return newPrintCmd(&cobra.Command{
		Use:     "history NAME",
		Short:   fmt.Sprintf("Show every registration and retirement of a %s", kind),
		Example: fmt.Sprintf("  agora %s history NAME --output json", cmdNoun(kind)),
		Args:    exactArgs(1, "NAME"),
	}, opts, runF, historyRun)
}

func historyRun(ctx context.Context, opts *refOptions) error {
	f := opts.f
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	evs, err := view.New(h.DB, h.Blobs).History(ctx, opts.kind, opts.arg)
	if err != nil {
		return err
	}
	return emit(f.IO, opts.output, evs, func(evs []catalog.Event) error {
		rows := make([][]string, len(evs))
		for i, e := range evs {
			rows[i] = []string{fmtTime(f.IO, f.Now(), e.At), e.Action, orDash(string(e.Digest)), e.Actor}
		}
		return printTable(f.IO, []string{"WHEN", "ACTION", "DIGEST", "ACTOR"}, rows)
	})
}

// newShowCmd builds 'KIND show': run resolves the version and prints it.
func newShowCmd(f *Factory, runF func(*refOptions) error, kind catalog.Kind, short string, run func(context.Context, *refOptions) error) *cobra.Command {
	opts := &refOptions{printOptions: printOptions{f: f}, kind: kind}
	return newPrintCmd(&cobra.Command{
		Use:     "show NAME[@sha256:HEX]",
		Short:   short,
		Example: fmt.Sprintf("  agora %[1]s show NAME\n  agora %[1]s show NAME@sha256:HEX --output json", cmdNoun(kind)),
		Args:    exactArgs(1, "NAME[@sha256:HEX]"),
	}, opts, runF, run)
}

// resolveContent resolves the options' reference in the catalog and reads that version's
// content: the start of every 'KIND show'.
func resolveContent(ctx context.Context, opts *refOptions) (*view.Catalog, catalog.Version, []byte, error) {
	h, err := opts.f.Home(ctx)
	if err != nil {
		return nil, catalog.Version{}, nil, err
	}
	r := view.New(h.DB, h.Blobs)
	v, err := r.Resolve(ctx, opts.kind, opts.arg)
	if err != nil {
		return nil, catalog.Version{}, nil, err
	}
	data, err := r.Content(v)
	if err != nil {
		return nil, catalog.Version{}, nil, err
	}
	return r, v, data, nil
}

func cmdNoun(kind catalog.Kind) string { return string(kind) }

// exactArgs is cobra.ExactArgs with a message that names the arguments and counts as a usage
// error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf(cmd, "%s takes %s (got %d argument(s))", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

// splitList splits "a,b" and repeated flags into names, dropping empties.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}
