// Package catalogcmd is what the catalog's nouns (agora capability, subagent, env, workspace,
// apply) share: list, show and history of a kind, register through the privileged writer
// (catalog/provision) and the JSON items of a list. It holds no command of its own.
package catalogcmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// registerResult is the JSON shape of register and assign.
type registerResult struct {
	Action  string          `json:"action"`
	Version catalog.Version `json:"version"`
	// ApproveNotes say what the capability's approve rules cannot see.
	ApproveNotes []string `json:"approve_notes,omitempty"`
}

// PrintRegistered prints what a register or assign recorded: the change and the version,
// as one JSON document with --output json.
func PrintRegistered(f *cmdutil.Factory, format string, c provision.Change, v catalog.Version) error {
	if format == cmdutil.FormatJSON {
		return cmdutil.WriteJSON(f.IO.Out, registerResult{Action: c.Action, Version: v, ApproveNotes: c.ApproveNotes})
	}
	defer PrintApproveNotes(f.IO.ErrOut, "agora: note: ", c.ApproveNotes)
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

// PrintApproveNotes writes what approve rules cannot see, a line each after prefix.
func PrintApproveNotes(w io.Writer, prefix string, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "%s%s\n", prefix, n)
	}
}

// RegisterRun registers what prepare makes of the command line, with its audit entry, and
// prints the outcome: the end of every 'KIND register'.
func RegisterRun(ctx context.Context, f *cmdutil.Factory, output string, prepare func(*provision.Writer) (*provision.Pending, error)) error {
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
	return PrintRegistered(f, output, c, v)
}

// ListColumns describes how one kind prints in a table.
type ListColumns struct {
	Headers []string
	Row     func(f *cmdutil.Factory, v catalog.Version) []string
}

type listOptions struct {
	cmdutil.PrintOptions
	kind catalog.Kind
	cols ListColumns
}

// NewListCmd builds 'KIND list' of kind, printed in cols.
func NewListCmd(f *cmdutil.Factory, runF func(*listOptions) error, kind catalog.Kind, cols ListColumns) *cobra.Command {
	opts := &listOptions{PrintOptions: cmdutil.PrintOptions{F: f}, kind: kind, cols: cols}
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:   "list",
		Short: fmt.Sprintf("List the latest version of every %s", kind),
		Long: fmt.Sprintf(`List the latest version of every active %s, sorted by name.
Retired names are left out; 'agora %s history NAME' still shows them.`, kind, cmdNoun(kind)),
		Args: cmdutil.NoArgs,
	}, opts, runF, listRun)
}

func listRun(ctx context.Context, opts *listOptions) error {
	f := opts.F
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	vs, err := view.New(h.DB, h.Blobs).List(ctx, opts.kind)
	if err != nil {
		return err
	}
	if opts.Output == cmdutil.FormatJSON {
		out, err := listJSON(opts.kind, vs)
		if err != nil {
			return err
		}
		return cmdutil.WriteJSON(f.IO.Out, out)
	}
	return cmdutil.Emit(f.IO, opts.Output, vs, func(vs []catalog.Version) error {
		if len(vs) == 0 && f.IO.OutTTY {
			fmt.Fprintf(f.IO.ErrOut, "agora: no %s registered; see 'agora %s register --help'\n", opts.kind.Plural(), cmdNoun(opts.kind))
			return nil
		}
		rows := make([][]string, len(vs))
		for i, v := range vs {
			rows[i] = opts.cols.Row(f, v)
		}
		return cmdutil.PrintTable(f.IO, opts.cols.Headers, rows)
	})
}

// RefOptions are the options of a command about one catalog name or version: arg.
type RefOptions struct {
	cmdutil.PrintOptions
	Kind catalog.Kind
}

// NewHistoryCmd builds 'KIND history NAME': every registration and retirement of the name.
func NewHistoryCmd(f *cmdutil.Factory, runF func(*RefOptions) error, kind catalog.Kind) *cobra.Command {
	opts := &RefOptions{PrintOptions: cmdutil.PrintOptions{F: f}, Kind: kind}
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:     "history NAME",
		Short:   fmt.Sprintf("Show every registration and retirement of a %s", kind),
		Example: fmt.Sprintf("  agora %s history NAME --output json", cmdNoun(kind)),
		Args:    cmdutil.ExactArgs(1, "NAME"),
	}, opts, runF, historyRun)
}

func historyRun(ctx context.Context, opts *RefOptions) error {
	f := opts.F
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	evs, err := view.New(h.DB, h.Blobs).History(ctx, opts.Kind, opts.Arg)
	if err != nil {
		return err
	}
	return cmdutil.Emit(f.IO, opts.Output, evs, func(evs []catalog.Event) error {
		rows := make([][]string, len(evs))
		for i, e := range evs {
			rows[i] = []string{cmdutil.FmtTime(f.IO, f.Now(), e.At), e.Action, cmdutil.OrDash(string(e.Digest)), e.Actor}
		}
		return cmdutil.PrintTable(f.IO, []string{"WHEN", "ACTION", "DIGEST", "ACTOR"}, rows)
	})
}

// NewShowCmd builds 'KIND show': run resolves the version and prints it.
func NewShowCmd(f *cmdutil.Factory, runF func(*RefOptions) error, kind catalog.Kind, short string, run func(context.Context, *RefOptions) error) *cobra.Command {
	opts := &RefOptions{PrintOptions: cmdutil.PrintOptions{F: f}, Kind: kind}
	return cmdutil.NewPrintCmd(&cobra.Command{
		Use:     "show NAME[@sha256:HEX]",
		Short:   short,
		Example: fmt.Sprintf("  agora %[1]s show NAME\n  agora %[1]s show NAME@sha256:HEX --output json", cmdNoun(kind)),
		Args:    cmdutil.ExactArgs(1, "NAME[@sha256:HEX]"),
	}, opts, runF, run)
}

// ResolveContent resolves the options' reference in the catalog and reads that version's
// content: the start of every 'KIND show'.
func ResolveContent(ctx context.Context, opts *RefOptions) (*view.Catalog, catalog.Version, []byte, error) {
	h, err := opts.F.Home(ctx)
	if err != nil {
		return nil, catalog.Version{}, nil, err
	}
	r := view.New(h.DB, h.Blobs)
	v, err := r.Resolve(ctx, opts.Kind, opts.Arg)
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

// FmtBinding is a binding on one line: its hosts, then the headers the value goes in.
func FmtBinding(b catalog.Binding) string {
	return strings.Join(b.Hosts, ", ") + " (in " + strings.Join(append([]string{"Authorization"}, b.Headers...), ", ") + ")"
}
