package cron_test

import (
	"context"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/cron"
	"github.com/agora-dev/agora/internal/store"
)

// Schedules when the clock goes back (table.go ClockBack, Schedule.From,
// UnmarkedRun).

func clockBackEntries(t *testing.T, db *store.DB, name string) int {
	t.Helper()
	var n int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries WHERE kind = 'orch.schedule.clock_back' AND subject = ?`, "schedule/"+name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func addSchedule(t *testing.T, tb *cron.Table, name, spec string, now time.Time) *cron.Schedule {
	t.Helper()
	s := &cron.Schedule{Name: name, Spec: mustParse(t, spec, "UTC"), Plan: []byte(`{"x":1}`), Digest: "sha256:x", Actor: "alice", PlanName: "p", Queue: "default", Tasks: 1}
	if err := tb.Add(context.Background(), s, now); err != nil {
		t.Fatal(err)
	}
	got, err := tb.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRedTeam46xClockBack_Holds: a clock that steps back less than a minute behind the slot
// just fired moves nothing; one that steps back further is recorded once, however often the
// scheduler looks (ClockBack called again with the same or a later now); From counts from the
// recounted slot; UnmarkedRun never takes the run of the slot fired ahead before it comes.
func TestRedTeam46xClockBack_Holds(t *testing.T) {
	ctx := context.Background()
	tb, db := newTable(t)
	s := addSchedule(t, tb, "h", "0 * * * *", utc("2026-11-24T00:30:00Z"))
	L := utc("2026-11-24T05:00:00Z") // fired while the clock was 4.5 hours ahead
	if ok, err := tb.Mark(ctx, s, cron.Firing{Slot: L, Missed: 3, RunID: "h@" + L.Format(time.RFC3339), Created: true}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	// Back by 59 seconds behind L: no recount.
	if moved, err := tb.ClockBack(ctx, L.Add(-59*time.Second)); err != nil || len(moved) != 0 {
		t.Fatalf("a step back of 59s: moved %d, %v", len(moved), err)
	}
	// Back to 00:45: recounted once, however many looks.
	now := utc("2026-11-24T00:45:00Z")
	for i := range 5 {
		moved, err := tb.ClockBack(ctx, now.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[i == 0]; len(moved) != want {
			t.Fatalf("look %d: moved %d, want %d", i, len(moved), want)
		}
	}
	if n := clockBackEntries(t, db, "h"); n != 1 {
		t.Fatalf("%d clock_back entries after five looks, want 1", n)
	}
	got, _ := tb.Get(ctx, "h")
	if !got.NextDue.Equal(utc("2026-11-24T01:00:00Z")) {
		t.Fatalf("next due %s after the clock came back, want 01:00", got.NextDue)
	}
	at1 := utc("2026-11-24T01:00:00Z")
	if f := got.From(at1); !f.Before(at1) || !got.Spec.Next(f).Equal(at1) {
		t.Fatalf("From(01:00) = %s: the 01:00 slot is not counted", f)
	}
	if f := got.From(now); !f.Equal(now) {
		t.Errorf("From(00:45) = %s, want now", f)
	}
}

// TestRedTeam46xClockBack_OffGridLastSlotRecordedEveryLook: a schedule's last slot that is
// not on its spec's grid any more (the zone's rules changed after it fired: a zone moved its
// offset by 30 minutes, as Pyongyang and Caracas did) and the clock back behind it by more than
// a minute but less than the shift: ClockBack's query (last_slot > now+1m AND next_due >
// last_slot) still selects it after it set next_due = Next(now), because Next(now) is later
// than the off-grid last slot; so every look of the scheduler (each minute, each wake)
// records another orch.schedule.clock_back and logs another warning until the clock passes
// the last slot.
func TestRedTeam46xClockBack_OffGridLastSlotRecordedEveryLook(t *testing.T) {
	ctx := context.Background()
	tb, db := newTable(t)
	s := addSchedule(t, tb, "d", "0 * * * *", utc("2026-11-24T00:30:00Z"))
	L := utc("2026-11-24T12:30:00Z") // the 12:00 slot as the zone's old rules placed it
	if ok, err := tb.Mark(ctx, s, cron.Firing{Slot: L, RunID: "d@" + L.Format(time.RFC3339), Created: true}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	now := utc("2026-11-24T12:05:00Z")
	for i := range 10 { // ten looks, a minute apart
		if _, err := tb.ClockBack(ctx, now.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// Its next slot (13:00) is already the first after now: nothing to move, so at most one
	// entry (none: ClockBack leaves a row whose next slot is already counted from now).
	if n := clockBackEntries(t, db, "d"); n > 1 {
		t.Fatalf("%d orch.schedule.clock_back entries (and serve warnings) after ten looks a minute apart, want at most 1: next_due = Next(now) = 13:00 is still later than the off-grid last slot 12:30, so the row is selected and recorded again at every look", n)
	}
	if got, _ := tb.Get(ctx, "d"); !got.NextDue.Equal(utc("2026-11-24T13:00:00Z")) {
		t.Fatalf("next due %s, want 13:00", got.NextDue)
	}
}
