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
}

// slotsByScan lists every slot in [from, to) by looking at every minute: a minute is a slot
// when its wall clock matches and no earlier instant within three hours had that wall clock.
func slotsByScan(l literal, loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	for u := from.Truncate(time.Minute); u.Before(to); u = u.Add(time.Minute) {
		w := u.In(loc)
		dayOK := l.dom(w.Day()) && l.dow(int(w.Weekday()))
		if !l.domStar && !l.dowStar {
			dayOK = l.dom(w.Day()) || l.dow(int(w.Weekday()))
		}
		if !l.minute(w.Minute()) || !l.hour(w.Hour()) || !l.month(int(w.Month())) || !dayOK {
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
		"30 2 * * *":   {minute: is(30), hour: is(2), dom: all, month: all, dow: all, domStar: true, dowStar: true},
		"0 0 * * *":    {minute: is(0), hour: is(0), dom: all, month: all, dow: all, domStar: true, dowStar: true},
		"15 1-3 * * 0": {minute: is(15), hour: is(1, 2, 3), dom: all, month: all, dow: is(0), domStar: true},
		"0 0 31 * 0":   {minute: is(0), hour: is(0), dom: is(31), month: all, dow: is(0)},
		"45 * * * *":   {minute: is(45), hour: all, dom: all, month: all, dow: all, domStar: true, dowStar: true},
	}
	zones := map[string]int{ // zone -> year
		"Europe/Berlin": 2026, "America/Sao_Paulo": 2018, "Australia/Lord_Howe": 2026,
		"Pacific/Apia": 2011, "America/New_York": 2026, "Asia/Kathmandu": 1985, "UTC": 2026,
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
