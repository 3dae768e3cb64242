package verify

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// orchEnds are the orch.db entries that end an attempt and name its dispatch.
var orchEnds = map[string]bool{entry.TaskSucceeded: true, entry.TaskFailed: true, entry.TaskRetryScheduled: true,
	entry.TaskCancelled: true, entry.TaskNeedsInput: true,
	// Run extension: finished work held for review, red work handed to a fix.
	entry.TaskProduced: true, entry.TaskRejected: true}

// checkVerdicts checks the run's verify gates across both logs: each attempt's end in
// orch.db names the verdict its dispatch's end names (or none when it has none), and each
// verdict the orch.db names has its orch.task.verified entry, recorded once, before the end,
// with the same digest. A bundle with either log's verdict entry removed fails here, whoever
// re-signed its selection.
func (rv *runVerifier) checkVerdicts(fired map[string]string, attempts map[string]*attempt) {
	type orchSide struct {
		ends     []*EntryFields
		verified []*EntryFields
	}
	byDispatch := map[string]*orchSide{}
	for i := range rv.orch.entries {
		e := &rv.orch.entries[i]
		if !orchEnds[e.Kind] && e.Kind != entry.TaskVerified {
			continue
		}
		d, _ := e.Details[entry.KeyDispatchID].(string)
		o := byDispatch[d]
		if o == nil {
			o = &orchSide{}
			byDispatch[d] = o
		}
		if e.Kind == entry.TaskVerified {
			o.verified = append(o.verified, e)
		} else {
			o.ends = append(o.ends, e)
		}
	}
	ok, n := true, 0
	for _, d := range slices.Sorted(maps.Keys(byDispatch)) {
		o := byDispatch[d]
		var dispVerdict string
		if a := attempts[d]; a != nil && len(a.terminal) == 1 {
			dispVerdict, _ = a.terminal[0].Details[entry.KeyVerdict].(string)
		}
		if problem := orchVerdictProblem(o.ends, o.verified, dispVerdict); problem != "" {
			ok = false
			rv.fail(CheckVerdicts, truncate(d, 40), "dispatch %s (task %s): %s", truncate(d, 40), fired[d], problem)
			continue
		}
		if dispVerdict != "" {
			n++
		}
	}
	if ok {
		if n == 1 {
			rv.pass(CheckVerdicts, "", "the run's one verdict is recorded in both logs, before the end it decided")
		} else {
			rv.pass(CheckVerdicts, "", "every one of the run's %d verdicts is recorded in both logs, before the end it decided", n)
		}
	}
}

func orchVerdictProblem(ends, verified []*EntryFields, dispVerdict string) string {
	var want string
	for _, e := range ends {
		v, _ := e.Details[entry.KeyVerdict].(string)
		if v != dispVerdict {
			return fmt.Sprintf("its %s entry (%d) names verdict %q, its dispatch's end %q", e.Kind, e.Seq, truncate(v, 80), truncate(dispVerdict, 80))
		}
		want = v
	}
	switch {
	case want == "" && len(verified) > 0:
		return fmt.Sprintf("an orch.task.verified entry (%d) that no end of the attempt names", verified[0].Seq)
	case want == "":
		return ""
	case len(verified) != 1:
		return fmt.Sprintf("its end names verdict %s, and the bundle holds %d orch.task.verified entries for it, want exactly 1", truncate(want, 80), len(verified))
	case verified[0].Details[entry.KeyVerdict] != want:
		return fmt.Sprintf("its orch.task.verified entry (%d) records verdict %v, its end names %s", verified[0].Seq, verified[0].Details[entry.KeyVerdict], truncate(want, 80))
	case verified[0].Seq > ends[0].Seq:
		return fmt.Sprintf("its orch.task.verified entry (%d) comes after its end (%d)", verified[0].Seq, ends[0].Seq)
	}
	return ""
}
