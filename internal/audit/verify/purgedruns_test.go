package verify_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestPurgedRunsOf: a retention.run_purged entry about a run is listed with its name and end;
// one about something else, or a task below a run, is an error; other kinds are skipped.
func TestPurgedRunsOf(t *testing.T) {
	ok := `{"actor":"system","details":{"ended_at":"2026-01-01T00:00:00Z","name":"nightly","role":"retention-sweep"},"kind":"retention.run_purged","seq":3,"subject":"run/r1","time":"2026-11-24T12:00:00Z"}`
	got, err := verify.PurgedRunsOf([]verify.Entry{{Index: 3, Entry: []byte(ok)},
		{Index: 4, Entry: []byte(`{"actor":"a","details":{},"kind":"orch.run.sealed","seq":4,"subject":"run/r1","time":"2026-11-24T12:00:00Z"}`)}})
	if err != nil || len(got) != 1 || got[0] != (verify.PurgedRun{Entry: 3, Run: "r1", Name: "nightly", EndedAt: "2026-01-01T00:00:00Z"}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, subject := range []string{"dispatch/d1", "run/", "run/r1/task/t"} {
		bad := strings.Replace(ok, `"run/r1"`, `"`+subject+`"`, 1)
		if _, err := verify.PurgedRunsOf([]verify.Entry{{Index: 3, Entry: []byte(bad)}}); err == nil || !strings.Contains(err.Error(), "not a run") {
			t.Errorf("subject %q: %v", subject, err)
		}
	}
}

// FuzzPurgedRunsOf: whatever an entry holds, PurgedRunsOf returns runs with an id and no
// slash, or an error; never a panic.
func FuzzPurgedRunsOf(f *testing.F) {
	f.Add([]byte(`{"actor":"system","details":{"ended_at":"2026-01-01T00:00:00Z","name":"nightly"},"kind":"retention.run_purged","seq":3,"subject":"run/r1","time":"2026-11-24T12:00:00Z"}`))
	f.Add([]byte(`{"kind":"retention.run_purged","subject":"run/x/y","details":{"name":5}}`))
	f.Add([]byte(`"kind":"retention.run_purged"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := verify.PurgedRunsOf([]verify.Entry{{Index: 1, Entry: data}})
		if err != nil {
			return
		}
		for _, p := range got {
			if p.Run == "" || strings.Contains(p.Run, "/") || p.Entry != 1 {
				t.Fatalf("listed %+v", p)
			}
		}
	})
}
