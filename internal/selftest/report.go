package selftest

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// What the runner saw, besides Blocked and Allowed.
const (
	// NotRun: the attack's program never wrote its canary (the dispatch failed before it,
	// or a tool it needs is missing): neither blocked nor allowed, and a failure.
	NotRun = "not-run"
	// NotEnforced: the host does not enforce the control the attack needs (the record's
	// isolation lacks it): an honest row with doctor's fix, never a pass.
	NotEnforced = "not-enforced"
)

// Row is one attack's line of the table.
type Row struct {
	ID       string `json:"id"`
	Class    string `json:"class"`
	Expected string `json:"expected"`
	Seen     string `json:"seen"`
	Control  string `json:"control"`
	Pass     bool   `json:"pass"`
	// Evidence is what decided Seen: the record, a probe, the program's report.
	Evidence string `json:"evidence"`
	// Fix is what makes a not-enforced row enforceable (agora doctor's fix).
	Fix      string `json:"fix,omitempty"`
	Dispatch string `json:"dispatch,omitempty"`
	// Seconds is the attack's wall time, from its probes' set-up to its row; attacks run
	// at once, so the rows' sum is more than the run's.
	Seconds float64 `json:"seconds"`
}

// Report is one target's run of the corpus.
type Report struct {
	Target   string        `json:"target"`
	Rows     []Row         `json:"rows"`
	Elapsed  time.Duration `json:"-"`
	Seconds  float64       `json:"seconds"`
	Blocked  int           `json:"blocked"`
	Attacks  int           `json:"attacks"`
	Allowed  int           `json:"allowed"`
	Legit    int           `json:"legitimate"`
	Failed   int           `json:"failed"`
	Unenforc int           `json:"not_enforced"`
	// NotRun counts the failed rows whose program never ran: a failure that is not a
	// boundary seen breaking.
	NotRun int    `json:"not_run"`
	Digest string `json:"digest"`
	// Classes is the rows' wall time summed by class, most first: attack-seconds, more
	// than the run's since attacks run at once (docs/BENCHMARKS.md quotes them).
	Classes []ClassTime `json:"classes"`
	// OtherProviders are the entries left out because they are for other providers only.
	OtherProviders []string `json:"other_providers,omitempty"`
}

// ClassTime is one class's share of a run: its rows and their seconds summed.
type ClassTime struct {
	Class   string  `json:"class"`
	Rows    int     `json:"rows"`
	Seconds float64 `json:"seconds"`
}

// classTimes sums rows' seconds by class, most first (then by name).
func classTimes(rows []Row) []ClassTime {
	at := map[string]int{}
	var cs []ClassTime
	for _, row := range rows {
		i, ok := at[row.Class]
		if !ok {
			i = len(cs)
			at[row.Class] = i
			cs = append(cs, ClassTime{Class: row.Class})
		}
		cs[i].Rows++
		cs[i].Seconds += row.Seconds
	}
	for i := range cs {
		cs[i].Seconds = math.Round(cs[i].Seconds*1000) / 1000
	}
	slices.SortFunc(cs, func(a, b ClassTime) int {
		if c := cmp.Compare(b.Seconds, a.Seconds); c != 0 {
			return c
		}
		return strings.Compare(a.Class, b.Class)
	})
	return cs
}

// finish counts the rows and digests the table.
func (r *Report) finish(elapsed time.Duration) {
	r.Elapsed, r.Seconds = elapsed, elapsed.Round(time.Millisecond).Seconds()
	r.Blocked, r.Attacks, r.Allowed, r.Legit, r.Failed, r.Unenforc, r.NotRun = 0, 0, 0, 0, 0, 0, 0
	for _, row := range r.Rows {
		if row.Expected == Blocked {
			r.Attacks++
			if row.Pass {
				r.Blocked++
			}
		} else {
			r.Legit++
			if row.Pass {
				r.Allowed++
			}
		}
		switch row.Seen {
		case NotEnforced:
			r.Unenforc++
		case NotRun:
			r.NotRun++
		}
		if !row.Pass {
			r.Failed++
		}
	}
	r.Digest = tableDigest(r.Rows)
	r.Classes = classTimes(r.Rows)
}

// OK reports whether every attack was blocked and every legitimate operation worked.
func (r *Report) OK() bool { return r.Failed == 0 }

// Summary is the report's one line: "selftest local: 39/39 blocked, 6/6 allowed, 21 s".
func (r *Report) Summary() string {
	s := fmt.Sprintf("selftest %s: %d/%d blocked, %d/%d allowed, %.0f s", r.Target, r.Blocked, r.Attacks, r.Allowed, r.Legit, r.Seconds)
	if r.Unenforc > 0 {
		s += fmt.Sprintf(", %d not enforced here", r.Unenforc)
	}
	if r.NotRun > 0 {
		s += fmt.Sprintf(", %d not run", r.NotRun)
	}
	if n := len(r.OtherProviders); n > 0 {
		s += fmt.Sprintf(", %d for other providers left out", n)
	}
	return s
}

// tableDigest is the sha256 of the rows' identifying columns as JSON: an auditor who holds
// the table can check it against the selftest.run entry.
func tableDigest(rows []Row) string {
	type cell struct {
		ID, Expected, Seen, Control string
		Pass                        bool
	}
	cells := make([]cell, len(rows))
	for i, r := range rows {
		cells[i] = cell{r.ID, r.Expected, r.Seen, r.Control, r.Pass}
	}
	b, _ := json.Marshal(cells) // a slice of plain structs always marshals
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// WriteTable prints the rows, aligned, then a line per not-enforced fix and the summary.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTACK\tCLASS\tEXPECTED\tSEEN\tCONTROL\tRESULT\tEVIDENCE")
	for _, row := range r.Rows {
		res := "ok"
		if !row.Pass {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.ID, row.Class, row.Expected, row.Seen, row.Control, res, clip(row.Evidence, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if row.Fix != "" {
			if _, err := fmt.Fprintf(w, "%s: not enforced here; fix: %s\n", row.ID, row.Fix); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
