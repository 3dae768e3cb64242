package cron_test

import (
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/cron"
)

// FuzzParse parses arbitrary specs and zones: Parse never panics; a spec it accepts
// normalises to itself, and its slots are minute-aligned UTC instants strictly after the time
// asked, one per wall-clock minute, with Due's latest slot at or before now and the next after.
func FuzzParse(f *testing.F) {
	for _, s := range []struct {
		spec, zone string
		at         int64
	}{
		{"0 2 * * *", "Europe/Berlin", 1795000000},
		{"30 2 * * *", "Europe/Berlin", 1774742400}, // around the spring gap
		{"30 2 * * *", "Europe/Berlin", 1792800000}, // around the autumn repeat
		{"*/7 1-5 */3 jan,MAR * ", "America/Sao_Paulo", 1540000000},
		{"0 0 * * *", "America/Sao_Paulo", 1539475200}, // midnight that does not exist
		{"@daily", "Asia/Kathmandu", 0},
		{"0 0 29 2 *", "UTC", 1700000000},
		{"0 0 30 2 *", "", 0},
		{"TZ=", "", 0},
		{"CRON_TZ=x", "", 0},
		{"@every 1s", "", 0},
		{"1-2-3 * * * *", "", 0},
		{"5/0 * * * *", "", 0},
		{"0 0 1,15 * 1", "Australia/Lord_Howe", 1600000000}, // a half-hour DST shift
		{"? ? ? ? ?", "UTC", 0},
		{"0 0 31 * SUN", "Pacific/Apia", 1325000000}, // a day that was skipped
	} {
		f.Add(s.spec, s.zone, s.at)
	}
	lo, hi := time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	zones := []string{"UTC", "Europe/Berlin", "America/Sao_Paulo", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kathmandu",
		"America/St_Johns", "Antarctica/Troll", "Africa/Casablanca", "Pacific/Kiritimati"}
	f.Fuzz(func(t *testing.T, spec, zone string, at int64) {
		s, err := cron.Parse(spec, zone)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			// The spec in a zone with clock changes, whatever zone was given.
			if s, err = cron.Parse(spec, zones[len(zone)%len(zones)]); err != nil {
				return
			}
		}
		again, err := cron.Parse(s.String(), s.Zone())
		if err != nil || again.String() != s.String() || again.Zone() != s.Zone() {
			t.Fatalf("normalised %q in %q does not parse to itself: %v", s.String(), s.Zone(), err)
		}
		if at < lo || at > hi {
			at = lo + (at%(hi-lo)+(hi-lo))%(hi-lo)
		}
		now := time.Unix(at, 0).UTC()
		prev := now
		for i := 0; i < 3; i++ {
			n := s.Next(prev)
			if n.IsZero() {
				return // nothing within five years of a date far out: allowed
			}
			if !n.After(prev) || n.Second() != 0 || n.Nanosecond() != 0 || n.Location() != time.UTC {
				t.Fatalf("%q in %s: Next(%s) = %s: not a minute strictly after it, in UTC", s, s.Zone(), prev, n)
			}
			if i > 0 {
				loc, _ := cron.LoadZone(s.Zone())
				a, b := prev.In(loc), n.In(loc)
				if a.Format("2006-01-02 15:04") == b.Format("2006-01-02 15:04") {
					t.Fatalf("%q in %s: two slots at wall-clock %s", s, s.Zone(), a.Format("2006-01-02 15:04"))
				}
			}
			prev = n
		}
		last := now.Add(-time.Duration(at%(3*24*3600)) * time.Second)
		latest, missed, ok := s.Due(last, now)
		if !ok {
			if n := s.Next(last); !n.IsZero() && !n.After(now) {
				t.Fatalf("%q: nothing due after %s at %s, yet %s came", s, last, now, n)
			}
			return
		}
		if !latest.After(last) || latest.After(now) || missed < 0 {
			t.Fatalf("%q: Due(%s, %s) = %s, %d", s, last, now, latest, missed)
		}
		if n := s.Next(latest); !n.IsZero() && !n.After(now) {
			t.Fatalf("%q: Due(%s, %s) = %s, but %s came after it", s, last, now, latest, n)
		}
	})
}
