package config

import (
	"strings"
	"testing"
	"time"
)

func TestResident_IdleFor(t *testing.T) {
	for _, c := range []struct {
		idle string
		want time.Duration
		err  string
	}{
		{"", DefaultResidentIdle, ""},
		{"0", 0, ""},
		{"30s", 30 * time.Second, ""},
		{"24h", 24 * time.Hour, ""},
		{"24h1s", 0, "want 0 (off) up to 24h"},
		{"-1m", 0, "want 0 (off) up to 24h"},
		{"ten minutes", 0, "want a duration such as 10m"},
		{"0s", 0, ""},
	} {
		got, err := Resident{Idle: c.idle}.IdleFor()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("idle %q: error %v, want %q", c.idle, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("idle %q: %v, %v; want %v", c.idle, got, err, c.want)
		}
	}
}
