package catalogcmd

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/catalog/ccimport"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/grant"
)

// ImportResult is the JSON shape of 'subagent import'.
type ImportResult struct {
	DryRun    bool               `json:"dry_run"`
	Applied   bool               `json:"applied"`
	Subagents []ImportedSubagent `json:"subagents"`
	Skipped   []ccimport.Skipped `json:"skipped"`
	Changes   []provision.Change `json:"changes"`
}

// ImportedSubagent is one file's mapping.
type ImportedSubagent struct {
	File string `json:"file"`
	Name string `json:"name"`
	*ccimport.Imported
}

// ImportedOf lists the subagent files of sets, mapped, and the files they skipped.
func ImportedOf(sets ...*ccimport.Set) ([]ImportedSubagent, []ccimport.Skipped) {
	subs, skipped := []ImportedSubagent{}, []ccimport.Skipped{}
	for _, set := range sets {
		for _, im := range set.Agents {
			subs = append(subs, ImportedSubagent{File: im.Agent.File, Name: im.Agent.Name, Imported: im})
		}
		skipped = append(skipped, set.Skipped...)
	}
	return subs, skipped
}

// PrintImport writes each file's mapping, tool by tool, for people.
func PrintImport(w io.Writer, res ImportResult) {
	for _, s := range res.Subagents {
		fmt.Fprintf(w, "%s -> subagent %s (claude-code), capability %s\n", s.File, s.Name, s.Capability)
		if s.DefaultTools {
			fmt.Fprintf(w, "  (the file lists no tools: --default-tools gives them)\n")
		}
		for _, t := range s.Tools {
			line := "  "
			if t.Line > 0 {
				line = fmt.Sprintf("  line %d: ", t.Line)
			}
			fmt.Fprintf(w, "%s%s -> %s", line, t.Entry, grantString(t.Grant))
			if len(t.Claude) > 0 {
				fmt.Fprintf(w, " (claude: %s)", strings.Join(t.Claude, ", "))
			}
			if t.Note != "" {
				fmt.Fprintf(w, "; %s", t.Note)
			}
			fmt.Fprintln(w)
		}
		model := cmdutil.OrDash(s.Model)
		if s.ModelNote != "" {
			model += " (" + s.ModelNote + ")"
		}
		fmt.Fprintf(w, "  model: %s\n", model)
		fmt.Fprintf(w, "  grant: %s\n", grantString(s.Grant))
	}
	for _, sk := range res.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", sk.File, sk.Reason)
	}
}

// grantString is a grant on one line: its tools, then its command patterns quoted, then
// its egress hosts; "nothing" when it is empty.
func grantString(g grant.Set) string {
	parts := append([]string{}, g.Tools...)
	for _, c := range g.Commands {
		parts = append(parts, strconv.Quote(c))
	}
	for _, r := range g.Egress {
		parts = append(parts, "egress "+r.String())
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " ")
}
