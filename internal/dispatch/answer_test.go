package dispatch_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/store"
)

// TestMigration_OldAttemptsKeepTheirRun: attempts recorded before dispatches carried their run
// get it from their actor ("USER via orch/RUN/TASK") when the "dispatch answers" step runs,
// so an attempt that waited for an answer across the upgrade is still a run's attempt (never
// answered over MCP or by `agora dispatch resume`); other actors get none.
func TestMigration_OldAttemptsKeepTheirRun(t *testing.T) {
	ctx := t.Context()
	all := agoradb.Migrations()
	step := slices.IndexFunc(all, func(m store.Migration) bool { return m.Name == "dispatch answers" })
	if step < 0 {
		t.Fatal(`no migration named "dispatch answers"`)
	}
	path := filepath.Join(t.TempDir(), "agora.db")
	db, err := store.Open(ctx, path, all[:step])
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string][2]string{
		"01AAAAAAAAAAAAAAAAAAAAAAA1": {"alice via orch/01RUNAAAAAAAAAAAAAAAAAAAAA/task-a", "01RUNAAAAAAAAAAAAAAAAAAAAA task-a"},
		"01AAAAAAAAAAAAAAAAAAAAAAA2": {"mcp:planner via orch/run-2/b", "run-2 b"},
		"01AAAAAAAAAAAAAAAAAAAAAAA3": {"mcp:planner", " "},
		"01AAAAAAAAAAAAAAAAAAAAAAA4": {"bob", " "},
		"01AAAAAAAAAAAAAAAAAAAAAAA5": {"carol via orch/", " "},
	}
	for id, a := range actors {
		if _, err := db.SQL().ExecContext(ctx, `INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox,
			network, input_digest, timeout_ms, actor, created_at) VALUES (?, 'needs_input', 's', 'sha256:00', '[]', 'local', 'bwrap', 'none', 'sha256:00', 1000, ?, '2026-01-01T00:00:00Z')`,
			id, a[0]); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if db, err = store.Open(ctx, path, all); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, a := range actors {
		var run, task string
		if err := db.SQL().QueryRowContext(ctx, `SELECT run_id, task_id FROM dispatches WHERE id = ?`, id).Scan(&run, &task); err != nil {
			t.Fatal(err)
		}
		if got := run + " " + task; got != a[1] {
			t.Errorf("actor %q: run and task %q, want %q", a[0], got, a[1])
		}
	}
}
