package cron_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/cron"
)

func mustParse(t testing.TB, spec, zone string) *cron.Spec {
	t.Helper()
	s, err := cron.Parse(spec, zone)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, zone, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParse_Refuses(t *testing.T) {
	tests := []struct{ spec, zone, want string }{
		{"", "", "cron spec is empty"},
		{"   ", "", "cron spec is empty"},
		{"* * * *", "", "has 4 fields; want five"},
		{"0 * * * * *", "", "has 6 fields"},
		{"@every 1h", "", "unknown descriptor"},
		{"@reboot", "", "unknown descriptor"},
		{"TZ=UTC 0 2 * * *", "", "give the zone with --tz"},
		{"CRON_TZ=UTC 0 2 * * *", "", "give the zone with --tz"},
		{"TZ=", "", "give the zone with --tz"}, // the library panics on this one
		{"60 * * * *", "", "above maximum"},
		{"*/0 * * * *", "", "step of range should be a positive number"},
		{"0 0 30 2 *", "", "never fires"},
		{"0 0 31 4,6,9,11 *", "", "never fires"},
		{"0 2 * * *", "Mars/Olympus", "not in the IANA time zone database"},
		{"0 2 * * *", "Local", "want an IANA zone name"},
		{"0 2 * * *", "../../etc/passwd", "want an IANA zone name"},
		{"0 2 * * *", "/usr/share/zoneinfo/UTC", "want an IANA zone name"},
		{"0 2 * * \x00", "", "printable ASCII"},
		{strings.Repeat("1,", 100) + "1 * * * *", "", "at most 128"},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"/"+tt.zone, func(t *testing.T) {
			_, err := cron.Parse(tt.spec, tt.zone)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q, %q) = %v, want an error containing %q", tt.spec, tt.zone, err, tt.want)
			}
		})
	}
	if _, err := cron.Parse("0 0 30 2 *", ""); !errors.Is(err, cron.ErrNeverFires) {
		t.Errorf("30 February: %v, want ErrNeverFires", err)
	}
}

func TestSpec_Next(t *testing.T) {
	tests := []struct {
		spec, zone, after, want string
	}{
		{"0 2 * * *", "Europe/Berlin", "2026-11-23T12:00:00Z", "2026-11-24T01:00:00Z"}, // CET is UTC+1
		{"0 2 * * *", "Europe/Berlin", "2026-07-01T12:00:00Z", "2026-07-02T00:00:00Z"}, // CEST is UTC+2
		{"0  2 *\t* *", "", "2026-11-23T02:00:00Z", "2026-11-24T02:00:00Z"},            // strictly after; spaces normalised
		{"@hourly", "", "2026-11-23T02:00:00Z", "2026-11-23T03:00:00Z"},
		{"*/15 * * * *", "UTC", "2026-11-23T02:00:30Z", "2026-11-23T02:15:00Z"},
		{"0 0 29 2 *", "UTC", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 9 * * mon-fri", "America/New_York", "2026-11-27T15:00:00Z", "2026-11-30T14:00:00Z"}, // Friday afternoon -> Monday
		// 2:30 Berlin does not exist on 2026-03-29 (clocks go 2:00 -> 3:00): a fixed time runs
		// at the first instant after the change, 3:00 CEST, as cron runs it; the next day as
		// usual. A wildcard spec's skipped minutes have no slot.
		{"30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"},
		{"*/30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T00:00:00Z"},
		// @daily where midnight is skipped: Santiago, 2026-09-06 00:00 -> 01:00 (-04 ->
		// -03): the day's slot at 01:00 -03, once; Beirut, 2026-03-29 00:00 -> 01:00.
		{"@daily", "America/Santiago", "2026-09-05T12:00:00Z", "2026-09-06T04:00:00Z"},
		{"@daily", "America/Santiago", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z"},
		{"@weekly", "America/Santiago", "2026-09-01T12:00:00Z", "2026-09-06T04:00:00Z"},
		{"@daily", "Asia/Beirut", "2026-03-28T12:00:00Z", "2026-03-28T22:00:00Z"},
		{"@hourly", "America/Santiago", "2026-09-06T03:30:00Z", "2026-09-06T04:00:00Z"},
		// 2:30 Berlin happens twice on 2026-10-25 (3:00 -> 2:00): one slot, at its first instant.
		{"30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"},
		{"30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		// Every wall-clock minute fires once: 2:00 and 2:30 came in summer time, so after
		// 2:30 CEST the next slot is 3:00 CET, not the repeated 2:00 and 2:30.
		{"*/30 * * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z"},
		// A zone that skipped a whole day (Pacific/Apia, 30 December 2011): the library's
		// own Next never returns from this one.
		{"0 0 31 * SUN", "Pacific/Apia", "2011-12-27T18:13:20Z", "2011-12-30T10:00:00Z"}, // 31 December at +14
	}
	for _, tt := range tests {
		t.Run(tt.spec+" "+tt.zone+" "+tt.after, func(t *testing.T) {
			s := mustParse(t, tt.spec, tt.zone)
			got := s.Next(utc(tt.after))
			if !got.Equal(utc(tt.want)) || got.Location() != time.UTC {
				t.Errorf("Next(%s) = %s, want %s (UTC)", tt.after, got, tt.want)
			}
		})
	}
	if s := mustParse(t, "0  2 *\t* *", ""); s.String() != "0 2 * * *" || s.Zone() != "UTC" {
		t.Errorf("normalised as %q in %q", s.String(), s.Zone())
	}
}

func TestSpec_Due(t *testing.T) {
	s := mustParse(t, "0 * * * *", "UTC") // hourly
	created := utc("2026-11-24T00:30:00Z")
	if _, _, ok := s.Due(created, utc("2026-11-24T00:59:59Z")); ok {
		t.Error("a slot is due before the first one comes")
	}
	latest, missed, ok := s.Due(created, utc("2026-11-24T01:00:00Z"))
	if !ok || !latest.Equal(utc("2026-11-24T01:00:00Z")) || missed != 0 {
		t.Errorf("on time: %s missed %d ok %v", latest, missed, ok)
	}
	// Down from 00:59 to 03:10: the slots 01:00, 02:00, 03:00 came; one run, for 03:00, two missed.
	latest, missed, ok = s.Due(created, utc("2026-11-24T03:10:00Z"))
	if !ok || !latest.Equal(utc("2026-11-24T03:00:00Z")) || missed != 2 {
		t.Errorf("after an outage: %s missed %d ok %v; want 03:00 with 2 missed", latest, missed, ok)
	}
	// After 03:00 fired, nothing is due until 04:00.
	if _, _, ok := s.Due(utc("2026-11-24T03:00:00Z"), utc("2026-11-24T03:59:00Z")); ok {
		t.Error("a slot is due again right after it fired")
	}
	// A year down on a schedule every minute: the latest slot exactly, the missed count capped.
	m := mustParse(t, "* * * * *", "UTC")
	latest, missed, ok = m.Due(utc("2025-01-01T00:00:00Z"), utc("2026-01-01T00:00:30Z"))
	if !ok || !latest.Equal(utc("2026-01-01T00:00:00Z")) || missed != cron.MaxMissedCount {
		t.Errorf("a year of minutes: %s missed %d ok %v; want 2026-01-01T00:00:00Z with %d", latest, missed, ok, cron.MaxMissedCount)
	}
}
