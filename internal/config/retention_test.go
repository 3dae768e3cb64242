package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
)

func TestRetention_Parse(t *testing.T) {
	c := config.Default(t.TempDir())
	if err := config.Parse("agora.yaml", []byte("retention: {blobs: 90d, logs: 30d, runs: 180d}\n"), c); err != nil {
		t.Fatal(err)
	}
	p, err := c.Retention.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if p.Blobs != 90*24*time.Hour || p.Logs != 30*24*time.Hour || p.Runs != 180*24*time.Hour || !p.Set() {
		t.Fatalf("policy %+v", p)
	}
	// The default purges nothing.
	if p, err := config.Default(t.TempDir()).Retention.Policy(); err != nil || p.Set() {
		t.Fatalf("default policy %+v, %v: want nothing purged", p, err)
	}
}

// TestRetention_Refused: a retention of 0 or a negative, a bare number, another unit, an
// unknown key and a case-folded key are errors naming the line, never a
// policy that purges everything at once.
func TestRetention_Refused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"retention: {blobs: 0d}\n", "retention.blobs"},
		{"retention: {logs: -1d}\n", "retention.logs"},
		{"retention: {blobs: \"90\"}\n", "want whole days"},
		{"retention: {logs: 0s}\n", "want whole days"},
		{"retention: {logs: 1h}\n", "want whole days"},
		{"retention: {blobs: 36501d}\n", "want 1d to 36500d"},
		{"retention: {runs: 0d}\n", "retention.runs"},
		{"retention: {runs: 180}\n", "want whole days"},
		{"retention: {runs: 4320h}\n", "want whole days"},
		{"retention: {runs: 180d, jobs: 1d}\n", "jobs"},
		{"retention: {Blobs: 90d}\n", "Blobs"},
		{"retention: {blobs: 90d, blobs: 1d}\n", "blobs"},
		{"retention: 90d\n", "retention"},
	} {
		c := config.Default(t.TempDir())
		err := config.Parse("agora.yaml", []byte(tc.yaml), c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one naming %q", tc.yaml, err, tc.want)
		}
	}
}

// FuzzRetentionConfig: whatever the retention section says, Parse returns a policy of whole
// days in range or an error, never a panic and never a zero-or-negative purge age.
func FuzzRetentionConfig(f *testing.F) {
	for _, s := range []string{"retention: {blobs: 90d, logs: 30d}\n", "retention: {blobs: 0d}\n",
		"retention:\n  logs: -1d\n", "retention: {runs: 1d}\n", "retention: []\n", "retention: {blobs: 1d, logs: ~}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		c := config.Default(t.TempDir())
		if err := config.Parse("agora.yaml", []byte(src), c); err != nil {
			return
		}
		p, err := c.Retention.Policy()
		if err != nil {
			t.Fatalf("Parse accepted %q but Policy refused it: %v", src, err)
		}
		for _, d := range []time.Duration{p.Blobs, p.Logs, p.Runs} {
			if d != 0 && (d < 24*time.Hour || d > 36500*24*time.Hour) {
				t.Fatalf("%q gave %v", src, d)
			}
		}
	})
}
