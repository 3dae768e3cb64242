package orch_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
)

// A slot's run has the id NAME@SLOT; submitting the slot again, before or after a restart,
// returns that run and starts nothing; the same plan in the next slot is a run of its own
// (a slot is not deduplicated by the plan's identity, as a hand submission is).
func TestEngine_SubmitSlot(t *testing.T) {
	exec := newFakeExec(succeed)
	path := filepath.Join(t.TempDir(), "orch.db")
	h := startOpts(t, path, exec, orch.Options{})
	p := mkPlan(t, "nightly", 2, spec{ID: "a"})
	slot := orch.Slot{Schedule: "nightly", At: time.Date(2026, 11, 24, 2, 0, 0, 0, time.FixedZone("CET", 3600)), Missed: 2}
	id, created, err := h.eng.SubmitSlot(t.Context(), p, orch.Checkout{}, "alice via schedule/nightly", slot)
	if err != nil || !created || id != "nightly@2026-11-24T01:00:00Z" {
		t.Fatalf("SubmitSlot = %q, %v, %v; want nightly@2026-11-24T01:00:00Z created", id, created, err)
	}
	again, created, err := h.eng.SubmitSlot(t.Context(), p, orch.Checkout{}, "alice via schedule/nightly", slot)
	if err != nil || created || again != id {
		t.Fatalf("SubmitSlot again = %q, %v, %v; want %s not created", again, created, err, id)
	}
	r := h.wait(id)
	if r.Schedule != "nightly" || r.Slot == nil || !r.Slot.Equal(slot.At) || r.Missed != 2 || r.Queue != "default" {
		t.Errorf("status: schedule %q slot %v missed %d queue %q; want nightly, %v, 2, default", r.Schedule, r.Slot, r.Missed, r.Queue, slot.At)
	}
	h.stop()

	h2 := startOpts(t, path, exec, orch.Options{})
	again, created, err = h2.eng.SubmitSlot(t.Context(), p, orch.Checkout{}, "alice via schedule/nightly", slot)
	if err != nil || created || again != id {
		t.Fatalf("SubmitSlot after a restart = %q, %v, %v; want %s not created", again, created, err, id)
	}
	next := slot
	next.At, next.Missed = slot.At.Add(24*time.Hour), 0
	id2, created, err := h2.eng.SubmitSlot(t.Context(), p, orch.Checkout{}, "alice via schedule/nightly", next)
	if err != nil || !created || id2 != "nightly@2026-11-25T01:00:00Z" {
		t.Fatalf("the next slot = %q, %v, %v; want a new run nightly@2026-11-25T01:00:00Z", id2, created, err)
	}
	if r := h2.wait(id2); r.State != lifecycle.RunSucceeded || r.Missed != 0 {
		t.Errorf("next slot's run: %s, missed %d", r.State, r.Missed)
	}
	if n := len(exec.attempts()); n != 2 {
		t.Errorf("%d attempts for two slots of a one-task plan, want 2", n)
	}
	var details string
	if err := h2.db.SQL().QueryRow(`SELECT entry FROM audit_entries WHERE kind = 'orch.run.submitted' AND subject = ?`, "run/"+id).Scan(&details); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"schedule":"nightly"`, `"slot":"2026-11-24T01:00:00Z"`, `"missed":2`} {
		if !contains(details, want) {
			t.Errorf("orch.run.submitted details %s lack %s", details, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
