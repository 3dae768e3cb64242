package verify

import (
	"bytes"
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
	for _, e := range es {
		if !bytes.Contains(e.Entry, purgedRunKind) {
			continue
		}
		f, err := DecodeEntry(e.Entry)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %v", e.Index, err)
		}
		if f.Kind != entry.RetentionRunPurged {
			continue
		}
		id, ok := strings.CutPrefix(f.Subject, "run/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return nil, fmt.Errorf("entry %d: a retention.run_purged entry about %q, not a run", e.Index, truncate(f.Subject, 60))
		}
		name, _ := f.Details["name"].(string)
		ended, _ := f.Details["ended_at"].(string)
		out = append(out, PurgedRun{Entry: e.Index, Run: id, Name: name, EndedAt: ended})
	}
	return out, nil
}

// checkPurgedRuns compares the bundle's purged_runs with what its verified retention.run_purged
// entries record: a run dropped from the list, or listed with no entry, fails the row. A
// bundle with neither has no row.
func (v *verifier) checkPurgedRuns() {
	if len(v.b.PurgedRuns) == 0 && !v.holdsRunPurge() {
		return
	}
	want, err := PurgedRunsOf(v.verifiedEntries())
	if err != nil {
		v.fail(CheckPurgedRuns, "", "%v", err)
		return
	}
	listed := map[PurgedRun]bool{}
	for _, p := range v.b.PurgedRuns {
		if listed[p] {
			v.fail(CheckPurgedRuns, "", "run %s is listed twice", truncate(p.Run, 60))
			return
		}
		listed[p] = true
	}
	recorded := map[PurgedRun]bool{}
	for _, p := range want {
		recorded[p] = true
		if !listed[p] {
			v.fail(CheckPurgedRuns, "", "entry %d records run %s purged, but the bundle's purged_runs does not name it", p.Entry, truncate(p.Run, 60))
			return
		}
	}
	for _, p := range v.b.PurgedRuns {
		if !recorded[p] {
			v.fail(CheckPurgedRuns, "", "purged_runs names run %s, which no verified retention.run_purged entry of the bundle records", truncate(p.Run, 60))
			return
		}
	}
	var names []string
	for i, p := range want {
		if i == maxPurgedListed {
			names = append(names, fmt.Sprintf("and %d more", len(want)-i))
			break
		}
		names = append(names, fmt.Sprintf("%s (%s, ended %s)", truncate(p.Run, 60), truncate(p.Name, 60), truncate(p.EndedAt, 40)))
	}
	v.pass(CheckPurgedRuns, "", "%d runs purged from orch.db by retention, each recorded by a retention.run_purged entry: %s", len(want), strings.Join(names, ", "))
}

// holdsRunPurge reports whether any entry of the bundle may be a retention.run_purged entry.
func (v *verifier) holdsRunPurge() bool {
	for _, e := range v.b.Entries {
		if bytes.Contains(e.Entry, purgedRunKind) {
			return true
		}
	}
	return false
}
