package cron_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/cron"
)

// Fixed-time specs across clock changes (spec.go fixed, afterGap, gapWindow).

// TestRedTeam46xGap_MoreZonesMatchScan follows Next around every clock change of zones the
// package's own scan test does not cover: a 45-minute-offset zone whose change is at 02:45
// (Chatham), a half-hour change at 23:30 that skips to midnight (Pyongyang 2018), a half-hour
// forward change at 02:30 (Caracas 2016), a two-hour change (Troll), negative DST (Dublin),
// the Ramadan changes (Casablanca), a skipped day (Fakaofo 2011), a -3:30 zone (St Johns),
// changes at 00:00 and 01:00 (Asuncion, Gaza), and compares with the minute-by-minute scan.
func TestRedTeam46xGap_MoreZonesMatchScan(t *testing.T) {
	all := func(int) bool { return true }
	is := func(vs ...int) func(int) bool {
		return func(x int) bool {
			for _, v := range vs {
				if v == x {
					return true
				}
			}
			return false
		}
	}
	every := func(n int) func(int) bool { return func(x int) bool { return x%n == 0 } }
	specs := map[string]literal{
		"59 23 * * *":       {minute: is(59), hour: is(23), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
		"0,30 2 * * *":      {minute: is(0, 30), hour: is(2), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
		"45 2 * * *":        {minute: is(45), hour: is(2), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
		"30 0 * * *":        {minute: is(30), hour: is(0), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
		"0 0,1,2,3 * * *":   {minute: is(0), hour: is(0, 1, 2, 3), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
		"*/15 * * * *":      {minute: every(15), hour: all, dom: all, month: all, dow: all, domStar: true, dowStar: true},
		"0 12 30 12 *":      {minute: is(0), hour: is(12), dom: is(30), month: is(12), dow: all, domStar: false, dowStar: true, fixed: true},
		"10-50/20 23 * * *": {minute: func(x int) bool { return x == 10 || x == 30 || x == 50 }, hour: is(23), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
	}
	zones := map[string]int{
		"Pacific/Chatham": 2026, "Asia/Pyongyang": 2018, "America/Caracas": 2016, "Antarctica/Troll": 2026,
		"Europe/Dublin": 2026, "Africa/Casablanca": 2026, "Pacific/Fakaofo": 2011, "America/St_Johns": 2026,
		"America/Asuncion": 2024, "Asia/Gaza": 2026, "Australia/Lord_Howe": 2026, "Pacific/Apia": 2011,
	}
	for zone, year := range zones {
		loc, err := cron.LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		ts := transitions(loc, time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC))
		if len(ts) == 0 {
			t.Fatalf("%s had no clock change in %d", zone, year)
		}
		for text, l := range specs {
			s, err := cron.Parse(text, zone)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range ts {
				from, to := tr.Add(-30*time.Hour), tr.Add(30*time.Hour)
				want := slotsByScan(l, loc, from, to)
				var got []time.Time
				for n := s.Next(from.Add(-time.Second)); !n.IsZero() && n.Before(to); n = s.Next(n) {
					got = append(got, n)
					if len(got) > 10000 {
						break
					}
				}
				if diff := cmp.Diff(fmtAll(want), fmtAll(got)); diff != "" {
					t.Errorf("%q in %s around %s (-scan +Next):\n%s", text, zone, tr.Format(time.RFC3339), diff)
				}
			}
		}
	}
}

// TestRedTeam46xGap_TwoSlotsInASkippedHourFireOnce: New York's 02:00-03:00 of 8 March 2026 is
// skipped; "0,30 2 * * *" has two slots in it: both come at 03:00 EDT (07:00Z), one slot, and
// Due over the gap reports it once, with no phantom missed slot; Next from every second
// around the change never goes backwards nor repeats.
func TestRedTeam46xGap_TwoSlotsInASkippedHourFireOnce(t *testing.T) {
	s := mustParse(t, "0,30 2 * * *", "America/New_York")
	jump := utc("2026-03-08T07:00:00Z")
	if got := s.Next(utc("2026-03-08T06:59:59Z")); !got.Equal(jump) {
		t.Fatalf("Next before the gap = %s, want %s", got, jump)
	}
	if got := s.Next(jump); !got.Equal(utc("2026-03-09T06:00:00Z")) {
		t.Fatalf("Next after the gap's slot = %s, want 2026-03-09T06:00:00Z (02:00 EDT): the skipped hour's second slot fired again", got)
	}
	latest, missed, ok := s.Due(utc("2026-03-07T07:30:00Z"), utc("2026-03-08T07:05:00Z"))
	if !ok || !latest.Equal(jump) || missed != 0 {
		t.Errorf("Due over the gap: %s missed %d ok %v; want %s, 0 missed", latest, missed, ok, jump)
	}
	if _, _, ok := s.Due(jump, utc("2026-03-08T23:00:00Z")); ok {
		t.Error("a slot is due again after the skipped hour's slot fired")
	}
	// Monotonic, strictly after, from every 20s around the change.
	for u := utc("2026-03-08T05:00:00Z"); u.Before(utc("2026-03-08T09:00:00Z")); u = u.Add(20 * time.Second) {
		n := s.Next(u)
		if !n.After(u) {
			t.Fatalf("Next(%s) = %s, not after", u, n)
		}
		if n2 := s.Next(u.Add(20 * time.Second)); n2.Before(n) {
			t.Fatalf("Next went backwards: Next(%s)=%s, Next(+20s)=%s", u, n, n2)
		}
	}
	// Fall back: 01:30 comes twice on 1 November; "30 1 * * *" fires at the first only, and a
	// schedule whose last slot is the first is not due at the second.
	f := mustParse(t, "30 1 * * *", "America/New_York")
	first := utc("2026-11-01T05:30:00Z")
	if got := f.Next(utc("2026-11-01T04:00:00Z")); !got.Equal(first) {
		t.Fatalf("fall back first = %s", got)
	}
	if _, _, ok := f.Due(first, utc("2026-11-01T06:45:00Z")); ok {
		t.Error("the repeated 01:30 is due again")
	}
}

// TestRedTeam46xGap_DueNeverLoopsOrPanics: Due and Next on odd inputs (zero, far past, far
// future, now before last, the year 9999) return; Due's missed count across a skipped day
// counts the coalesced slots once.
func TestRedTeam46xGap_DueNeverLoopsOrPanics(t *testing.T) {
	for _, z := range []string{"Pacific/Apia", "America/New_York", "Australia/Lord_Howe", "Asia/Pyongyang"} {
		specs := []string{"59 23 * * *", "0 0 29 2 *", "@yearly", "0 12 30 12 *"}
		if z == "Pacific/Apia" {
			specs = append(specs, "* * * * *") // a missed count capped at MaxMissedCount: slow, once
		}
		for _, spec := range specs {
			s := mustParse(t, spec, z)
			for _, c := range [][2]time.Time{
				{{}, utc("2000-01-01T00:00:00Z")},
				{utc("2026-01-01T00:00:00Z"), utc("2025-01-01T00:00:00Z")},
				{utc("9990-01-01T00:00:00Z"), utc("9999-12-31T23:59:59Z")},
				{utc("2011-12-28T00:00:00Z"), utc("2012-01-02T00:00:00Z")},
			} {
				s.Due(c[0], c[1])
				s.Next(c[1])
			}
		}
	}
	// Apia skipped 30 December 2011: "0 12 * * *" of the 30th comes at the jump (31st 00:00
	// local), a distinct slot before the 31st's noon; from the 29th's noon to the 31st's
	// 12:30 the latest is the 31st's noon and one was missed (the 30th's, at the jump).
	s := mustParse(t, "0 12 * * *", "Pacific/Apia")
	loc, _ := time.LoadLocation("Pacific/Apia")
	noon29 := time.Date(2011, 12, 29, 12, 0, 0, 0, loc)
	noon31 := time.Date(2011, 12, 31, 12, 0, 0, 0, loc)
	jump := time.Date(2011, 12, 31, 0, 0, 0, 0, loc)
	if got := s.Next(noon29); !got.Equal(jump) {
		t.Errorf("Next after the 29th's noon = %s, want the jump %s", got, jump.UTC())
	}
	latest, missed, ok := s.Due(noon29, noon31.Add(30*time.Minute))
	if !ok || !latest.Equal(noon31) || missed != 1 {
		t.Errorf("Due over the skipped day: %s missed %d ok %v", latest, missed, ok)
	}
}
