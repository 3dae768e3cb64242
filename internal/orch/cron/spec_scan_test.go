package cron_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/cron"
)

// matches is a literal reading of a 5-field spec for the test's few specs: each field a
// list of numbers, ranges, */N or *.
type literal struct {
	minute, hour, dom, month, dow func(int) bool
	domStar, dowStar              bool
	// fixed: minute and hour are not wildcards; a slot a clock change skips comes at the
	// first instant after the change.
	fixed bool
}

// matchesWall says whether the wall-clock minute w (its fields read as they are) is a slot's.
func (l literal) matchesWall(w time.Time) bool {
	dayOK := l.dom(w.Day()) && l.dow(int(w.Weekday()))
	if !l.domStar && !l.dowStar {
		dayOK = l.dom(w.Day()) || l.dow(int(w.Weekday()))
	}
	return l.minute(w.Minute()) && l.hour(w.Hour()) && l.month(int(w.Month())) && dayOK
}

// slotsByScan lists every slot in [from, to) by looking at every minute: a minute is a slot
// when its wall clock matches and no earlier instant within three hours had that wall clock;
// for a fixed-time spec, also when the clock jumped forward to it over a wall-clock minute
// that matches.
func slotsByScan(l literal, loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	asUTC := func(t time.Time) time.Time {
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
	}
	for u := from.Truncate(time.Minute); u.Before(to); u = u.Add(time.Minute) {
		w := u.In(loc)
		if l.fixed && !u.Before(from) {
			skipped := false
			for sw := asUTC(u.Add(-time.Minute).In(loc)).Add(time.Minute); sw.Before(asUTC(w)); sw = sw.Add(time.Minute) {
				if l.matchesWall(sw) {
					skipped = true
				}
			}
			if skipped {
				out = append(out, u.UTC())
				continue
			}
		}
		if !l.matchesWall(w) {
			continue
		}
		first := true
		for back := time.Minute; back <= 3*time.Hour; back += time.Minute {
			p := u.Add(-back).In(loc)
			if p.Year() == w.Year() && p.YearDay() == w.YearDay() && p.Hour() == w.Hour() && p.Minute() == w.Minute() {
				first = false
				break
			}
		}
		if first && !u.Before(from) {
			out = append(out, u.UTC())
		}
	}
	return out
}

// transitions lists the instants a zone's offset changes in [from, to), to the hour.
func transitions(loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	_, prev := from.In(loc).Zone()
	for u := from; u.Before(to); u = u.Add(15 * time.Minute) {
		if _, o := u.In(loc).Zone(); o != prev {
			out = append(out, u)
			prev = o
		}
	}
	return out
}

// TestSpec_NextMatchesEveryMinute follows Next around every clock change of several zones in a
// year (including a half-hour change and a skipped day) and compares its slots with a scan of
// every minute.
func TestSpec_NextMatchesEveryMinute(t *testing.T) {
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
		"*/30 * * * *": {minute: every(30), hour: all, dom: all, month: all, dow: all, domStar: true, dowStar: true},
		"30 2 * * *":   {minute: is(30), hour: is(2), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
		"0 0 * * *":    {minute: is(0), hour: is(0), dom: all, month: all, dow: all, domStar: true, dowStar: true, fixed: true},
		"15 1-3 * * 0": {minute: is(15), hour: is(1, 2, 3), dom: all, month: all, dow: is(0), domStar: true, fixed: true},
		"0 0 31 * 0":   {minute: is(0), hour: is(0), dom: is(31), month: all, dow: is(0), fixed: true},
		"0 0 * * 0":    {minute: is(0), hour: is(0), dom: all, month: all, dow: is(0), domStar: true, fixed: true},
		"*/30 2 * * *": {minute: every(30), hour: is(2), dom: all, month: all, dow: all, domStar: true, dowStar: true},
		"45 * * * *":   {minute: is(45), hour: all, dom: all, month: all, dow: all, domStar: true, dowStar: true},
	}
	zones := map[string]int{ // zone -> year
		"Europe/Berlin": 2026, "America/Sao_Paulo": 2018, "Australia/Lord_Howe": 2026,
		"Pacific/Apia": 2011, "America/New_York": 2026, "Asia/Kathmandu": 1985, "UTC": 2026,
		// Midnight skipped: Santiago's and Havana's springs forward at 00:00, Beirut's,
		// Cairo's (from 2023).
		"America/Santiago": 2026, "Asia/Beirut": 2026, "America/Havana": 2026, "Africa/Cairo": 2026,
	}
	for zone, year := range zones {
		loc, err := cron.LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		ts := transitions(loc, time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC))
		if zone == "UTC" {
			ts = []time.Time{time.Date(year, 6, 1, 0, 0, 0, 0, time.UTC)}
		}
		if len(ts) == 0 {
			t.Fatalf("%s had no clock change in %d", zone, year)
		}
		for text, l := range specs {
			s, err := cron.Parse(text, zone)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range ts {
				from, to := tr.Add(-50*time.Hour), tr.Add(50*time.Hour)
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

func fmtAll(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = fmt.Sprint(t.Format(time.RFC3339))
	}
	return out
}
