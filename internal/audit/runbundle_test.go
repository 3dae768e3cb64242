package audit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
)

// endedFake answers each dispatch's provenance from a map; a missing id is a live dispatch.
type endedFake map[string][]byte

func (f endedFake) EndedProvenance(_ context.Context, id string) ([]byte, error) {
	if m, ok := f[id]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("dispatch %s is still started", id)
}

// TestExportRun_Assembles: the dispatch part selects exactly the run's dispatches, named for
// the run, from a checkpoint the export takes itself, and carries their manifests in task
// order; the orchestrator's part and the run's names pass through untouched.
func TestExportRun_Assembles(t *testing.T) {
	f := newFixture(t)
	for _, s := range []string{"dispatch/d1", "dispatch/other", "dispatch/d2", "dispatch/d3"} {
		appendEntry(t, f, audit.Entry{Actor: "test", Kind: "dispatch.accepted", Subject: s})
	}
	orch := &verify.Bundle{Format: "orch part"}
	parts := audit.RunParts{
		Run:   verify.RunInfo{ID: "r1", Name: "nightly", PlanDigest: "sha256:00"},
		Tasks: []audit.RunTask{{ID: "a", Dispatches: []string{"d1"}}, {ID: "b", Dispatches: []string{"d3", "d2"}}},
		Orch:  orch,
	}
	rb, err := f.cp.ExportRun(t.Context(), parts, endedFake{"d1": []byte("m1"), "d2": []byte("m2"), "d3": []byte("m3")})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Format != verify.RunFormat || rb.Run != parts.Run || rb.Orch != orch {
		t.Errorf("run bundle head: format %q run %+v orch %p, want %q %+v %p", rb.Format, rb.Run, rb.Orch, verify.RunFormat, parts.Run, orch)
	}
	sel := rb.Dispatches.Selection
	if want := []string{"dispatch/d1", "dispatch/d3", "dispatch/d2"}; !slices.Equal(sel.Subjects, want) || sel.Run != "r1" || sel.Count != 3 {
		t.Errorf("dispatch selection %+v, want subjects %v, run r1, 3 entries", sel, want)
	}
	var manifests []string
	for _, m := range rb.Dispatches.Manifests {
		manifests = append(manifests, string(m.Manifest))
	}
	if want := []string{"m1", "m3", "m2"}; !slices.Equal(manifests, want) {
		t.Errorf("manifests %v, want %v", manifests, want)
	}
}

func TestExportRun_Refuses(t *testing.T) {
	f := newFixture(t)
	appendEntry(t, f, audit.Entry{Actor: "test", Kind: "dispatch.accepted", Subject: "dispatch/d1"})
	run := verify.RunInfo{ID: "r1"}
	_, err := f.cp.ExportRun(t.Context(), audit.RunParts{Run: run, Tasks: []audit.RunTask{{ID: "a", Dispatches: []string{"d1"}}}}, endedFake{})
	if err == nil || err.Error() != "task a: dispatch d1 is still started" {
		t.Errorf("a live dispatch: got %v, want it named with its task", err)
	}
	_, err = f.cp.ExportRun(t.Context(), audit.RunParts{Run: run, Tasks: []audit.RunTask{{ID: "a"}}}, endedFake{})
	if err == nil || err.Error() != "run r1 fired no dispatch; there is nothing to bind its entries to" {
		t.Errorf("a run with no dispatch: got %v", err)
	}
	_, err = f.cp.ExportRun(t.Context(), audit.RunParts{Run: run, Tasks: []audit.RunTask{{ID: "a", Dispatches: []string{"d9"}}}}, endedFake{"d9": nil})
	if !errors.Is(err, audit.ErrNoEntries) {
		t.Errorf("a dispatch with no entry: got %v, want ErrNoEntries", err)
	}
}
