package labelcap

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// FuzzLabels: whatever a sandbox or a client names (a tool, a model, a route, a client), the
// label value is the name itself only when it is short and plain, else none, invalid or
// other; and the number of distinct values stays capped.
func FuzzLabels(f *testing.F) {
	for _, s := range []string{"", "read_file", "gpt-4o", "a b", "x\ny", strings.Repeat("a", 65), "sk-\x00", "model@sha256:00", "é"} {
		f.Add(s)
	}
	l := New(8)
	f.Fuzz(func(t *testing.T, v string) {
		got := l.Of(v)
		switch got {
		case "none", "invalid", "other":
		default:
			if got != v || !Valid(got) {
				t.Fatalf("Of(%q) = %q", v, got)
			}
		}
		if len(l.seen) > 8 {
			t.Fatalf("%d distinct values, cap 8", len(l.seen))
		}
		run, task := entry.SplitRun(v)
		if run != "" && !strings.HasPrefix(v, "run/"+run) || task != "" && !strings.HasSuffix(v, "/task/"+task) {
			t.Fatalf("entry.SplitRun(%q) = %q, %q", v, run, task)
		}
	})
}
