package tracing_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/tracing"
)

// FuzzJoin: any header is either ignored or a valid span context that formats back to the
// same ids; never a panic.
func FuzzJoin(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "", "00--", "ff-" + strings.Repeat("0", 50),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ctx := tracing.Join(context.Background(), s)
		tid, sid, sampled, ok := tracing.Parse(s)
		got := tracing.Traceparent(ctx)
		if !ok {
			if got != "" {
				t.Fatalf("%q: not parsed but joined as %q", s, got)
			}
			return
		}
		if len(tid) != 32 || len(sid) != 16 || !strings.Contains(s, tid) || !strings.Contains(s, sid) {
			t.Fatalf("%q parsed as %s %s", s, tid, sid)
		}
		// Flags other than sampled pass through; the ids and the sampled bit must not change.
		want := tracing.Format(tid, sid, sampled)
		if got[:53] != want[:53] || (strings.IndexByte("13579bdf", got[54]) >= 0) != sampled {
			t.Fatalf("%q joined as %q, want %q", s, got, want)
		}
	})
}
