package cli

import (
	"fmt"
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
}

func printRegistered(f *Factory, format string, c provision.Change, v catalog.Version) error {
	if format == formatJSON {
		return writeJSON(f.IO.Out, registerResult{Action: c.Action, Version: v})
	}
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

// listColumns describes how one kind prints in a table.
type listColumns struct {
	headers []string
	row     func(f *Factory, v catalog.Version) []string
}

func newListCmd(f *Factory, kind catalog.Kind, cols listColumns) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: fmt.Sprintf("List the latest version of every %s", kind),
		Long: fmt.Sprintf(`List the latest version of every active %s, sorted by name.
Retired names are left out; 'agora %s history NAME' still shows them.`, kind, cmdNoun(kind)),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			h, err := f.Home(cmd.Context())
			if err != nil {
				return err
			}
			vs, err := view.New(h.DB, h.Blobs).List(cmd.Context(), kind)
			if err != nil {
				return err
			}
			if output == formatJSON {
				return writeJSON(f.IO.Out, vs)
			}
			if len(vs) == 0 && f.IO.OutTTY {
				fmt.Fprintf(f.IO.ErrOut, "agora: no %s registered; see 'agora %s register --help'\n", kind.Plural(), cmdNoun(kind))
				return nil
			}
			rows := make([][]string, len(vs))
			for i, v := range vs {
				rows[i] = cols.row(f, v)
			}
			return printTable(f.IO, cols.headers, rows)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

func newHistoryCmd(f *Factory, kind catalog.Kind) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: fmt.Sprintf("Show every registration and retirement of a %s", kind),
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(cmd, output); err != nil {
				return err
			}
			h, err := f.Home(cmd.Context())
			if err != nil {
				return err
			}
			evs, err := view.New(h.DB, h.Blobs).History(cmd.Context(), kind, args[0])
			if err != nil {
				return err
			}
			if output == formatJSON {
				return writeJSON(f.IO.Out, evs)
			}
			rows := make([][]string, len(evs))
			for i, e := range evs {
				rows[i] = []string{fmtTime(f.IO, f.Now(), e.At), e.Action, orDash(string(e.Digest)), e.Actor}
			}
			return printTable(f.IO, []string{"WHEN", "ACTION", "DIGEST", "ACTOR"}, rows)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
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
