package gc

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// gcRunsTable prints the runs retention.runs removes, after the products' table.
func gcRunsTable(f *cmdutil.Factory, r gcReport) error {
	if len(r.RunItems) == 0 {
		return nil
	}
	rows := make([][]string, 0, len(r.RunItems))
	for _, it := range r.RunItems {
		rows = append(rows, []string{it.Run, it.Name, it.State, it.EndedAt.Format(time.DateOnly),
			strconv.Itoa(it.Tasks), strconv.Itoa(it.Attempts)})
	}
	return cmdutil.PrintTable(f.IO, []string{"RUN", "NAME", "STATE", "ENDED", "TASKS", "ATTEMPTS"}, rows)
}

// gcRunsSummary says how many runs go (verb: "would purge" or "purged") and which old ones
// are kept and why, so an operator is never left wondering why a run outlived retention.runs.
func gcRunsSummary(f *cmdutil.Factory, r gcReport, verb string) {
	if r.Runs == "keep" {
		return
	}
	n := len(r.RunItems)
	if res := r.Result; res != nil {
		n = res.Runs
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: gc: %s %d orchestrator runs from orch.db (retention runs %s)\n", verb, n, r.Runs)
	k := r.RunsKept
	if k.Unsealed > 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d failed runs old enough are kept because they are not sealed ('agora orch retry' may resume them); seal one to let it go: agora orch seal RUN\n", k.Unsealed)
	}
	if k.Scheduled > 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d runs old enough are kept because a schedule names them as its last run\n", k.Scheduled)
	}
	if k.BadDate > 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d ended runs are kept because their end time does not parse or lies in the future\n", k.BadDate)
	}
	if k.Unfolded > 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: gc: %d runs old enough are kept because orch.db's row log holds rows of theirs not yet folded into its tables (serve folds them when idle, or at its next start); the next sweep purges them: %s\n",
			k.Unfolded, strings.Join(k.UnfoldedRuns, ", "))
	}
}
