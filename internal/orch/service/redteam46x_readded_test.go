package service_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestRedTeam46xClock_ReAddedScheduleTakesTheOldSchedulesRun: attack: while the clock was a
// day ahead, schedule "nightly" (plan v1) fired slot L. The clock comes back; the operator
// removes "nightly" and adds it again with plan v2 (a fix). When L comes round, the new
// schedule's slot is answered with the OLD schedule's run of plan v1: UnmarkedRun takes any run
// named nightly whose slot is after the new schedule was added (the old run's slot L is, since
// the clock went back) and marks it "recovered", and SubmitSlot would return it anyway (run id
// NAME@SLOT). Plan v2 does not run at L, and the audit says the new schedule fired with a run
// of a plan it never had. UnmarkedRun's own comment assumed "a run of an earlier schedule of
// the same name is for a slot before this one was added", which a clock that went back breaks.
// Now UnmarkedRun takes only a run of the schedule's own plan, and a slot whose id names
// another plan's run is refused, saying so (a slot never runs twice).
func TestRedTeam46xClock_ReAddedScheduleTakesTheOldSchedulesRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := serveSkewed(t, filepath.Join(t.TempDir(), "orch.db"))
		hour := time.Now().UTC().Truncate(time.Hour)
		s.step(hour.Add(30*time.Minute + 30*time.Second))
		s.add(t, "nightly", "v1")

		L := hour.Add(24 * time.Hour)
		s.step(L.Add(5 * time.Second)) // the clock a day ahead: slot L fires
		old := s.schedule(t, "nightly")
		if !old.LastSlot.Equal(L) || old.LastRun == "" {
			t.Fatalf("ahead: last slot %s run %q, want %s fired", old.LastSlot, old.LastRun, L)
		}
		oldRun, err := s.eng.Status(context.Background(), old.LastRun)
		if err != nil {
			t.Fatal(err)
		}

		s.step(hour.Add(40 * time.Minute)) // back
		if err := s.sched.Table.Remove(context.Background(), "nightly", "tester"); err != nil {
			t.Fatal(err)
		}
		v2 := s.add(t, "nightly", "v2")
		if v2 == oldRun.PlanDigest {
			t.Fatal("fixture: the two plans have one digest")
		}

		// Real time reaches L (stepped to it, as the clock is right now).
		s.step(L.Add(5 * time.Second))
		sch := s.schedule(t, "nightly")
		if !sch.LastSlot.Equal(L) {
			t.Fatalf("at L the re-added schedule's last slot is %s, want %s", sch.LastSlot, L)
		}
		// Refused, saying why: the slot's id names the removed schedule's run, and a slot never
		// runs twice. Before, UnmarkedRun took that run as the new schedule's and the audit
		// said the new schedule fired with a plan it never had.
		if sch.LastRun != "" || !strings.Contains(sch.LastError, "of another plan") {
			t.Errorf("at L the re-added schedule (plan v2) is marked run %q, error %q; want refused naming the removed schedule's run",
				sch.LastRun, sch.LastError)
		}
		if refused := entries(t, s.db.SQL(), "orch.schedule.refused", "schedule/nightly"); len(refused) != 1 {
			t.Errorf("%d orch.schedule.refused entries, want 1", len(refused))
		}
	})
}
