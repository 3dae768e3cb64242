package audit_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
)

// omissionFixture is a log whose kinds interleave (catalog, dispatch, tool), so that a kind or
// subject export selects entries with gaps between them: exactly where omission hides.
func omissionFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	kinds := []string{"catalog.register", "dispatch.accepted", "tool.call"}
	for i := range 12 {
		appendEntry(t, f, audit.Entry{Actor: "alice", Kind: kinds[i%3], Subject: fmt.Sprintf("dispatch/d%d", i%2),
			Details: map[string]any{"n": i}})
	}
	f.checkpoint(t)
	return f
}

// TestVerify_CatchesOmission removes, adds or re-scopes entries of real filtered exports:
// the first seven cases passed every check before selections were signed (finding
// 5a); each now fails the selection row, and only the rows named.
func TestVerify_CatchesOmission(t *testing.T) {
	f := omissionFixture(t)
	otherSigner, _ := audittest.NewKey(t)
	other, err := f.cp.Export(t.Context(), audit.Selection{Kind: "tool.*"})
	if err != nil {
		t.Fatal(err)
	}
	sel := []string{"selection"}
	tests := []struct {
		name   string
		sel    audit.Selection
		mutate func(b *verify.Bundle)
		want   []string
		detail string // in the selection row, when set
	}{
		{"kind export: middle entry deleted, count lowered", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.Entries = slices.Delete(b.Entries, 1, 2)
			b.Selection.Count--
		}, sel, ""},
		{"kind export: last entry deleted, count lowered", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.Entries = b.Entries[:len(b.Entries)-1]
			b.Selection.Count--
		}, sel, ""},
		{"kind export: first entry deleted, from_index raised", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.Selection.FromIndex = b.Entries[0].Index + 1
			b.Entries = b.Entries[1:]
			b.Selection.Count--
		}, sel, ""},
		{"kind export: from_index lowered", audit.Selection{Kind: "dispatch.*", FromIndex: 4}, func(b *verify.Bundle) {
			b.Selection.FromIndex = 0
		}, sel, ""},
		{"kind export: kind narrowed", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.Selection.Kind = "dispatch.accepted"
		}, sel, ""},
		{"subject export: entry deleted, count lowered", audit.Selection{Subjects: []string{"dispatch/d0"}}, func(b *verify.Bundle) {
			b.Entries = slices.Delete(b.Entries, 2, 3)
			b.Selection.Count--
		}, sel, ""},
		{"subject export: a subject dropped with its entries", audit.Selection{Subjects: []string{"dispatch/d0", "dispatch/d1"}}, func(b *verify.Bundle) {
			var keep []verify.Entry
			for _, e := range b.Entries {
				if fields, _ := verify.DecodeEntry(e.Entry); fields.Subject == "dispatch/d0" {
					keep = append(keep, e)
				}
			}
			b.Entries, b.Selection.Count, b.Selection.Subjects = keep, len(keep), []string{"dispatch/d0"}
		}, sel, ""},
		{"kind export: count raised", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.Selection.Count++
		}, []string{"selection", "entries"}, `the signed selection says "count 4", the bundle says "count 5"`},
		{"kind export: an entry before from_index added back", audit.Selection{Kind: "dispatch.*", FromIndex: 4}, func(b *verify.Bundle) {
			full, err := f.cp.Export(t.Context(), audit.Selection{Kind: "dispatch.*"})
			if err != nil {
				t.Fatal(err)
			}
			b.Entries = append([]verify.Entry{full.Entries[0]}, b.Entries...)
			b.Selection.FromIndex, b.Selection.Count = 0, b.Selection.Count+1
		}, sel, `the signed selection says "from_index 4", the bundle says "from_index 0"`},
		{"end_index lowered below the last entry", audit.Selection{}, func(b *verify.Bundle) {
			b.Selection.EndIndex = 5
		}, []string{"selection", "entries"}, ""},
		{"claimed for a run", audit.Selection{Subjects: []string{"dispatch/d0"}}, func(b *verify.Bundle) {
			b.Selection.Run = "R1"
		}, sel, `the signed selection says "run \"\"", the bundle says "run \"R1\""`},
		{"selection signed by another key", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			if err := verify.SignSelection(b, otherSigner); err != nil {
				t.Fatal(err)
			}
		}, sel, "not signed by key"},
		{"signed selection of another export", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.SelectionNote = other.SelectionNote
		}, sel, `the signed selection says "kind \"tool.*\"", the bundle says "kind \"dispatch.*\""`},
		{"signed selection removed", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.SelectionNote = nil
		}, sel, "carries no signed selection"},
		{"downgraded to format v1", audit.Selection{Kind: "dispatch.*"}, func(b *verify.Bundle) {
			b.Entries = slices.Delete(b.Entries, 1, 2)
			b.Format, b.SelectionNote, b.Selection.EndIndex, b.Selection.Count = verify.FormatV1, nil, 0, b.Selection.Count-1
		}, sel, "format agora-audit-bundle/v1 carries no signed selection, so entries removed from it cannot be detected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := f.cp.Export(t.Context(), tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			b, opts := roundTrip(t, src), verify.Options{Key: f.vkey}
			if rep := verify.Verify(b, opts); !rep.OK {
				t.Fatalf("before the omission: failed %v", failed(rep))
			}
			tt.mutate(b)
			rep := verifyBoth(t, b, opts)
			if rep.OK || rep.Tier != verify.TierNone {
				t.Errorf("got ok %v tier %s, want a failure at tier none", rep.OK, rep.Tier)
			}
			if diff := cmp.Diff(tt.want, failed(rep)); diff != "" {
				t.Errorf("failed rows (-want +got):\n%s", diff)
			}
			for _, c := range rep.Checks {
				if c.Check == verify.CheckSelection && !strings.Contains(c.Detail, tt.detail) {
					t.Errorf("selection row %q, want it to contain %q", c.Detail, tt.detail)
				}
			}
		})
	}
}
