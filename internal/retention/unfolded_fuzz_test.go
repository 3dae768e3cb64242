package retention

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzUnfoldedRunsColumn: a row log record's runs column holds the runs it names exactly when
// it is a non-empty JSON array of strings; anything else holds every run (fail closed). Never
// a panic, and never a run held only in part.
func FuzzUnfoldedRunsColumn(f *testing.F) {
	for _, s := range []string{`["r1"]`, `["r1","r2"]`, ``, `[]`, `null`, `"r1"`, `["r1",1]`, `{"r1":1}`, `["\ud800"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, col string) {
		u := &unfolded{runs: map[string]bool{}}
		u.add(col)
		var names []string
		if err := json.Unmarshal([]byte(col), &names); err != nil || len(names) == 0 {
			if !u.all {
				t.Fatalf("column %q holds %v, not every run", col, u.runs)
			}
			return
		}
		if u.all {
			t.Fatalf("column %q names %v, yet holds every run", col, names)
		}
		for _, n := range names {
			if !u.holds(n) {
				t.Fatalf("column %q names %q, which is not held", col, n)
			}
		}
		if probe := "a run no record names"; !slices.Contains(names, probe) && u.holds(probe) {
			t.Fatalf("column %q holds a run it does not name", col)
		}
	})
}
