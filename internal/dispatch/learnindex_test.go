package dispatch_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/store"
)

// TestRecords_LearnInRun: a run's learn dispatches, and only those (not its other
// dispatches, not another run's learn ones), found by a search of dispatches_learn_run,
// never a scan of every dispatch recorded (the run page asks on every load).
func TestRecords_LearnInRun(t *testing.T) {
	ctx := t.Context()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, d := range []struct {
		id, run string
		learn   bool
	}{
		{"01AAAAAAAAAAAAAAAAAAAAAAA1", "run-a", true},
		{"01AAAAAAAAAAAAAAAAAAAAAAA2", "run-a", false},
		{"01AAAAAAAAAAAAAAAAAAAAAAA3", "run-a", true},
		{"01AAAAAAAAAAAAAAAAAAAAAAA4", "run-b", true},
		{"01AAAAAAAAAAAAAAAAAAAAAAA5", "", true},
	} {
		if _, err := db.SQL().ExecContext(ctx, `INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox,
			network, input_digest, timeout_ms, actor, created_at, run_id, learn) VALUES (?, 'finished', 's', 'sha256:00', '[]', 'local', 'bwrap', 'none', 'sha256:00', 1000, 'orch', '2026-01-01T00:00:00Z', ?, ?)`,
			d.id, d.run, d.learn); err != nil {
			t.Fatal(err)
		}
	}
	got, err := dispatch.NewRecords(db, nil, nil).LearnInRun(ctx, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"01AAAAAAAAAAAAAAAAAAAAAAA1": true, "01AAAAAAAAAAAAAAAAAAAAAAA3": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LearnInRun(run-a) (-want +got):\n%s", diff)
	}
	rows, err := db.SQL().QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT id FROM dispatches WHERE run_id = ? AND learn = 1`, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if p := strings.Join(plan, "; "); !strings.Contains(p, "USING INDEX dispatches_learn_run") {
		t.Errorf("LearnInRun's query plan is %q, want a search of dispatches_learn_run", p)
	}
}
