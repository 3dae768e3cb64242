package cli

import (
	"bufio"
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
	formatTable = "table"
	formatJSON  = "json"
)

func addOutputFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "output", "o", formatTable, "output format: table or json (one JSON document on stdout)")
}

func checkOutput(cmd *cobra.Command, format string) error {
	if format != formatTable && format != formatJSON {
		return usageErrorf(cmd, "--output must be table or json, got %q", format)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printTable writes rows for people on a terminal (aligned, under a header) and for scripts
// otherwise (tab-separated, the header's names first when there is a row: a list piped to
// less or shown by make demo said nothing of what its columns were; -o json is the form for
// programs).
func printTable(ios *IOStreams, headers []string, rows [][]string) error {
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
func fmtTime(ios *IOStreams, now, t time.Time) string {
	if !ios.OutTTY {
		return t.UTC().Format(time.RFC3339)
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	}
	return plural(int(d/(24*time.Hour)), "day") + " ago"
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// fmtDigest is short on a terminal and full otherwise.
func fmtDigest(ios *IOStreams, d fmt.Stringer) string {
	s := d.String()
	if ios.OutTTY && len(s) > len("sha256:")+12 {
		return s[:len("sha256:")+12]
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// agentText makes text an agent wrote (a question, its options) safe to print on a terminal:
// see [agenttext.Escape], which the web run view shares.
func agentText(s string) string { return agenttext.Escape(s) }
