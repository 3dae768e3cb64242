package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// Schedules under clock trouble after "missed counts only slots that really
// passed" (reallyMissed, trusted) and "a slot whose id names a removed schedule's run of
// another plan is refused" (UnmarkedRun by digest).

// TestRedTeam46cClock_BehindThenCorrectedSlotsReallyPassed: attack: the host clock is three
// hours behind while serve runs (a VM whose RTC was wrong, before NTP synchronises); real time
// passes 01:00 and 02:00 with no run (the wall clock never reached them). NTP then steps the
// clock forward to the truth and 03:00 fires. 01:00 and 02:00 really passed, without a run:
// the audit must say so. reallyMissed anchors "trusted" at the last look's wall time, which
// was the wrong one, and counts them as jumped over; the audit said nothing of two slots that
// never ran (only serve's log did). Now the fired entry records them (jumped_over).
func TestRedTeam46cClock_BehindThenCorrectedSlotsReallyPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := serveSkewed(t, filepath.Join(t.TempDir(), "orch.db"))
		hour := time.Now().UTC().Truncate(time.Hour)
		s.step(hour.Add(30*time.Minute + 30*time.Second)) // the clock is right
		s.add(t, "h", "p")
		// The clock goes three hours behind (no slot fired yet: nothing for ClockBack).
		s.step(s.now().Add(-3 * time.Hour))
		// Three real hours pass with the scheduler looking every minute: the wall clock
		// goes from 21:30 to 00:30 and reaches no slot.
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		if got := s.schedule(t, "h").LastSlot; !got.IsZero() {
			t.Fatalf("fixture: a slot fired while the clock was behind: %s", got)
		}
		// NTP steps the clock to the truth: 03:30:30. Real time passed 01:00, 02:00, 03:00.
		truth := hour.Add(3*time.Hour + 30*time.Minute + 30*time.Second)
		s.step(truth)
		sch := s.schedule(t, "h")
		if !sch.LastSlot.Equal(hour.Add(3 * time.Hour)) {
			t.Fatalf("after the correction the last slot is %s, want 03:00", sch.LastSlot)
		}
		// serve cannot tell a clock corrected from behind from one jumping ahead (both are a
		// wall clock moving further than the time it measured): it counts neither as missed,
		// and the audit says the two slots were jumped over (jumped_over on the fired
		// entry), so the slots that never ran are on record either way.
		missed := entries(t, s.db.SQL(), "orch.schedule.missed", "schedule/h")
		total := int64(0)
		for _, m := range missed {
			total += int64(m["missed"].(float64))
		}
		for _, f := range entries(t, s.db.SQL(), "orch.schedule.fired", "schedule/h") {
			if j, ok := f["jumped_over"].(float64); ok {
				total += int64(j)
			}
		}
		if total != 2 {
			t.Errorf("01:00 and 02:00 really passed with no run, and the audit counts %d missed or jumped over (missed entries %v), want 2", total, missed)
		}
	})
}

// TestRedTeam46cClock_ReAddedSamePlanTakesOldMissedCount: attack: schedule "h" (plan p) is
// down for five hours; at restart 05:00 fires with missed=4 (01:00-04:00, true). The clock
// then goes back to 00:45; the operator removes "h" and adds it again with the same plan.
// The new schedule fires 01:00-04:00 on time (the clock steps through them); at 05:00
// UnmarkedRun finds the removed schedule's run h@05:00 (same plan, slot after the new
// schedule's last) and marks it "recovered" with the OLD missed count: the audit says the
// new schedule missed 4 slots between 04:00 and 05:00 (there are none) and that it recovered
// a run it submitted before a crash (it never submitted it).
func TestRedTeam46cClock_ReAddedSamePlanTakesOldMissedCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "orch.db")
		s := serveSkewed(t, path)
		hour := time.Now().UTC().Truncate(time.Hour)
		s.step(hour.Add(30*time.Minute + 30*time.Second))
		s.add(t, "h", "p")
		off := s.off.Load()
		s.stop()
		// Down across 01:00-05:00 (real time and the clock both).
		time.Sleep(5 * time.Hour)
		s = serveSkewed(t, path)
		s.off.Store(off)
		s.sched.Wake()
		synctest.Wait()
		first := s.schedule(t, "h")
		if !first.LastSlot.Equal(hour.Add(5 * time.Hour)) {
			t.Fatalf("fixture: after the downtime the last slot is %s, want 05:00", first.LastSlot)
		}
		before := entries(t, s.db.SQL(), "orch.schedule.missed", "schedule/h")
		if len(before) != 1 || before[0]["missed"].(float64) != 4 {
			t.Fatalf("fixture: missed entries %v, want one of 4", before)
		}

		s.step(hour.Add(45 * time.Minute)) // the clock goes back
		if err := s.sched.Table.Remove(context.Background(), "h", "tester"); err != nil {
			t.Fatal(err)
		}
		s.add(t, "h", "p") // the same plan, the same name
		for h := 1; h <= 5; h++ {
			s.step(hour.Add(time.Duration(h)*time.Hour + 10*time.Second))
			time.Sleep(30 * time.Second) // some real time too
			synctest.Wait()
		}
		sch := s.schedule(t, "h")
		if !sch.LastSlot.Equal(hour.Add(5 * time.Hour)) {
			t.Fatalf("the re-added schedule's last slot is %s, want 05:00", sch.LastSlot)
		}
		after := entries(t, s.db.SQL(), "orch.schedule.missed", "schedule/h")[1:]
		if len(after) != 0 {
			t.Errorf("the re-added schedule fired every slot from 01:00 to 05:00, yet the audit says it missed some: %v", after)
		}
		fired := entries(t, s.db.SQL(), "orch.schedule.fired", "schedule/h")
		last := fired[len(fired)-1]
		if last["recovered"] == true {
			t.Errorf("05:00 of the re-added schedule is audited as recovered (a run it submitted before a crash): %s", fmt.Sprint(last))
		}
	})
}
