package verify

import (
	"strings"
	"testing"
)

// TestAttemptProblem pins what a run bundle must hold of each attempt: fired by the run,
// selected by the export, one accepted entry, exactly one terminal entry (a sealed run has no
// open attempt), a succeeded task's dispatch finished, and the manifest its end names carried.
// The cases a real log cannot produce (two ends, no accepted entry) are built here directly:
// they are what a key holder who re-signs a selection could still try.
func TestAttemptProblem(t *testing.T) {
	const ref = "sha256:" + "ab"
	accepted := &EntryFields{Seq: 1, Kind: "dispatch.accepted"}
	finished := &EntryFields{Seq: 5, Kind: "dispatch.finished", Details: map[string]any{"manifest": ref}}
	failed := &EntryFields{Seq: 6, Kind: "dispatch.failed", Details: map[string]any{"manifest": ref}}
	noManifest := &EntryFields{Seq: 7, Kind: "dispatch.cancelled", Details: map[string]any{}}
	closed := &attempt{accepted: []*EntryFields{accepted}, terminal: []*EntryFields{finished}}
	tests := []struct {
		name      string
		fired     bool
		succeeded bool
		selected  bool
		a         *attempt
		carried   bool
		want      string // "" when the attempt is complete
	}{
		{"complete", true, true, true, closed, true, ""},
		{"failed attempt of a task that did not succeed", true, false, true,
			&attempt{accepted: []*EntryFields{accepted}, terminal: []*EntryFields{failed}}, true, ""},
		{"not fired, entries present", false, false, true, closed, true, "no task of the run fired it"},
		{"not fired, only selected", false, false, true, nil, true, "the export selected it, but no task"},
		{"fired, not selected", true, true, false, closed, true, "the export did not select it"},
		{"fired, no entries", true, true, true, nil, true, "holds none of its entries"},
		{"no accepted entry", true, true, true, &attempt{terminal: []*EntryFields{finished}}, true, "0 dispatch.accepted entries"},
		{"two accepted entries", true, true, true, &attempt{accepted: []*EntryFields{accepted, accepted}, terminal: []*EntryFields{finished}}, true, "2 dispatch.accepted entries"},
		{"open: no terminal entry", true, false, true, &attempt{accepted: []*EntryFields{accepted}}, true, "no terminal entry"},
		{"two terminal entries", true, true, true,
			&attempt{accepted: []*EntryFields{accepted}, terminal: []*EntryFields{finished, failed}}, true,
			"2 terminal entries (dispatch.finished at 5, dispatch.failed at 6)"},
		{"succeeded task whose dispatch failed", true, true, true,
			&attempt{accepted: []*EntryFields{accepted}, terminal: []*EntryFields{failed}}, true, "succeeded with it, but it ended dispatch.failed"},
		{"terminal entry names no manifest", true, false, true,
			&attempt{accepted: []*EntryFields{accepted}, terminal: []*EntryFields{noManifest}}, true, "names no manifest"},
		{"manifest not carried", true, true, true, closed, false, "which the bundle does not carry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fired, succeeded, selected, carried := map[string]string{}, map[string]string{}, map[string]bool{}, map[string]bool{}
			if tt.fired {
				fired["D"] = "T"
			}
			if tt.succeeded {
				succeeded["D"] = "T"
			}
			selected["D"] = tt.selected
			carried[ref] = tt.carried
			got := attemptProblem("D", fired, succeeded, selected, tt.a, carried)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
