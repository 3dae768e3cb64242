package verify

import (
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// CheckPurgedRuns is the row of orchestrator runs retention purged (docs/audit-bundle.md
// "Purged runs").
const CheckPurgedRuns = "purged-runs"

// PurgedRun is an orchestrator run whose rows retention removed from orch.db: the bundle names
// it so a reader knows the run is gone on purpose (its entries stay in the log). Each is
// recorded by the retention.run_purged entry at Entry, which the bundle holds.
type PurgedRun struct {
	Entry   uint64 `json:"entry"`    // index of the retention.run_purged entry
	Run     string `json:"run"`      // the run id (the entry's subject is run/ID)
	Name    string `json:"name"`     // its plan's name
	EndedAt string `json:"ended_at"` // when it ended, RFC 3339
}

// purgedRunKind is how a retention.run_purged entry's canonical bytes name its kind.
var purgedRunKind = []byte(`"kind":"` + entry.RetentionRunPurged + `"`)

// PurgedRunsOf lists the runs es's retention.run_purged entries record, in entry order. An
// entry of that kind that does not decode, or is not about a run, is an error.
func PurgedRunsOf(es []Entry) ([]PurgedRun, error) {
	var out []PurgedRun
	err := entriesOfKind(es, entry.RetentionRunPurged, purgedRunKind, func(idx uint64, f EntryFields) error {
		id, ok := strings.CutPrefix(f.Subject, "run/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return fmt.Errorf("entry %d: a retention.run_purged entry about %q, not a run", idx, truncate(f.Subject, 60))
		}
		name, _ := f.Details[entry.KeyName].(string)
		ended, _ := f.Details[entry.KeyEndedAt].(string)
		out = append(out, PurgedRun{Entry: idx, Run: id, Name: name, EndedAt: ended})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkPurgedRuns compares the bundle's purged_runs with what its verified retention.run_purged
// entries record: a run dropped from the list, or listed with no entry, fails the row. A
// bundle with neither has no row.
func (v *verifier) checkPurgedRuns() {
	if len(v.b.PurgedRuns) == 0 && !v.holdsTag(purgedRunKind) {
		return
	}
	var want []PurgedRun
	var err error
	if v.stream != nil {
		want, err = v.stream.purgedRuns, v.stream.purgedRunsErr
	} else {
		want, err = PurgedRunsOf(v.verifiedEntries())
	}
	if err != nil {
		v.fail(CheckPurgedRuns, "", "%v", err)
		return
	}
	checkListed(v, CheckPurgedRuns, v.b.PurgedRuns, want, listedWords[PurgedRun]{
		twice: func(p PurgedRun) string { return fmt.Sprintf("run %s is listed twice", truncate(p.Run, 60)) },
		unlisted: func(p PurgedRun) string {
			return fmt.Sprintf("entry %d records run %s purged, but the bundle's purged_runs does not name it", p.Entry, truncate(p.Run, 60))
		},
		unrecorded: func(p PurgedRun) string {
			return fmt.Sprintf("purged_runs names run %s, which no verified retention.run_purged entry of the bundle records", truncate(p.Run, 60))
		},
		item: func(p PurgedRun) string {
			return fmt.Sprintf("%s (%s, ended %s)", truncate(p.Run, 60), truncate(p.Name, 60), truncate(p.EndedAt, 40))
		},
		passed: "%d runs purged from orch.db by retention, each recorded by a retention.run_purged entry",
	})
}
