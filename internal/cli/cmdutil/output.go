package cmdutil

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/agenttext"
)

// Output formats.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// AddOutputFlag adds --output (-o), table or json, stored in dst.
func AddOutputFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "output", "o", FormatTable, "output format: table or json (one JSON document on stdout)")
}

// CheckOutput refuses an --output other than table or json as a usage error.
func CheckOutput(cmd *cobra.Command, format string) error {
	if format != FormatTable && format != FormatJSON {
		return UsageErrorf(cmd, "--output must be table or json, got %q", format)
	}
	return nil
}

// WriteJSON writes v as one indented JSON document, HTML characters unescaped.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printTable writes rows for people on a terminal (aligned, under a header) and for scripts
// otherwise (tab-separated, the header's names first when there is a row: a list piped to
// less or shown by make demo said nothing of what its columns were; -o json is the form for
// programs).
func PrintTable(ios *IOStreams, headers []string, rows [][]string) error {
	if !ios.OutTTY {
		// Buffered: `agora verify` of a large bundle prints a row per entry and per proof,
		// and a write per row made it spend more time in the kernel than checking them.
		w := bufio.NewWriter(ios.Out)
		if len(rows) > 0 {
			rows = append([][]string{headers}, rows...)
		}
		for _, r := range rows {
			if _, err := fmt.Fprintln(w, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	tw := tabwriter.NewWriter(ios.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fmtTime is relative on a terminal and RFC 3339 UTC otherwise.
func FmtTime(ios *IOStreams, now, t time.Time) string {
	if !ios.OutTTY {
		return t.UTC().Format(time.RFC3339)
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return Plural(int(d/time.Minute), "minute") + " ago"
	case d < 48*time.Hour:
		return Plural(int(d/time.Hour), "hour") + " ago"
	}
	return Plural(int(d/(24*time.Hour)), "day") + " ago"
}

// Plural is "1 unit" or "n units".
func Plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// fmtDigest is short on a terminal and full otherwise.
func FmtDigest(ios *IOStreams, d fmt.Stringer) string {
	s := d.String()
	if ios.OutTTY && len(s) > len("sha256:")+12 {
		return s[:len("sha256:")+12]
	}
	return s
}

// OrDash is s, or "-" when s is empty: a table cell is never blank.
func OrDash(s string) string {
	return cmp.Or(s, "-")
}

// Truncate is s on one line (runs of white space made one space), cut to n bytes with "..."
// when longer.
func Truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// agentText makes text an agent wrote (a question, its options) safe to print on a terminal:
// see [agenttext.Escape], which the web run view shares.
func AgentText(s string) string { return agenttext.Escape(s) }

// SplitList splits "a,b" and repeated flags into names, dropping empties.
func SplitList(values []string) []string {
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
