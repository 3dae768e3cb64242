package service

import (
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch/cron"
)

// TestReallyMissed: a slot counts as missed only if real time reached it. With the wall
// clock a day ahead of the minute that really passed since the last look, none of the 23
// hours it jumped over is missed; with three hours really passed (a host that slept, which
// CLOCK_BOOTTIME counts) before the jump, three are; with no look before (serve just started,
// as after downtime) or a clock that moved as real time did, the wall clock is trusted.
func TestReallyMissed(t *testing.T) {
	spec, err := cron.Parse("@hourly", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	from, now, slot := at("2026-11-24T00:30:00Z"), at("2026-11-25T00:00:05Z"), at("2026-11-25T00:00:00Z")
	_, missed, ok := spec.Due(from, now)
	if !ok || missed != 23 {
		t.Fatalf("fixture: Due says %d missed, ok %v", missed, ok)
	}
	for _, c := range []struct {
		name    string
		trusted time.Time
		want    int
	}{
		{"no look before", time.Time{}, 23},
		{"the clock moved as real time did", now.Add(-30 * time.Second), 23},
		{"a day ahead of a minute", at("2026-11-24T00:31:00Z"), 0},
		{"three hours really passed", at("2026-11-24T03:10:00Z"), 3},
		{"all but the last hour really passed", at("2026-11-24T23:10:00Z"), 23},
	} {
		if got := reallyMissed(spec, from, now, c.trusted, slot, missed); got != c.want {
			t.Errorf("%s: %d missed, want %d", c.name, got, c.want)
		}
	}
}
