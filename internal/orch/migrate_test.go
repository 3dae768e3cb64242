package orch_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/store"
)

// TestMigration_RunPlansMoveOut opens an orch.db written before plans moved to their own
// table (and before attempts were clustered by dispatch id), with an open run in it: the
// migrations keep the plan and the attempt, and the engine loads the run and finishes it.
func TestMigration_RunPlansMoveOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch.db")
	all := orch.Migrations()
	var before []store.Migration
	for _, m := range all {
		if m.Name == "run plans in their own table" {
			break
		}
		before = append(before, m)
	}
	if len(before) == len(all) {
		t.Fatal("no migration named \"run plans in their own table\"")
	}
	old, err := store.Open(context.Background(), path, before)
	if err != nil {
		t.Fatal(err)
	}
	p := mkPlan(t, "old", 2, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}})
	const now = "2026-01-01T00:00:00.000000000Z"
	if _, err := old.SQL().Exec(`INSERT INTO runs(id, name, digest, plan, state, actor, created_at) VALUES ('R1', 'old', ?, ?, 'running', 'test', ?)`,
		p.Digest(), p.Canonical(), now); err != nil {
		t.Fatal(err)
	}
	// a succeeded on its first attempt; b is ready.
	if _, err := old.SQL().Exec(`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id, ready_seq) VALUES ('R1', 0, 'a', 'succeeded', 1, 'D1', 1), ('R1', 1, 'b', 'ready', 0, '', 2)`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.SQL().Exec(`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, ended_at) VALUES ('D1', 'R1', 0, 1, 'succeeded', ?, ?)`, now, now); err != nil {
		t.Fatal(err)
	}
	old.Close()

	h := start(t, path, newNoopExec())
	r := h.wait("R1", api.RunSucceeded)
	if r.Name != "old" || r.Total != 2 || r.PlanDigest != p.Digest() {
		t.Fatalf("migrated run = %+v", r)
	}
	if got := r.Tasks[0].Attempts; got != 1 {
		t.Errorf("task a has %d attempts after the migration, want 1", got)
	}
	var state string
	if err := h.db.SQL().QueryRow(`SELECT state FROM attempts WHERE dispatch_id = 'D1'`).Scan(&state); err != nil || state != "succeeded" {
		t.Errorf("migrated attempt D1: state %q, %v", state, err)
	}
	var plan []byte
	if err := h.db.SQL().QueryRow(`SELECT plan FROM run_plans WHERE run_id = 'R1'`).Scan(&plan); err != nil || string(plan) != string(p.Canonical()) {
		t.Fatalf("run_plans row = %q, %v", plan, err)
	}
	// "runs identified by what they work on" rebuilt runs and its children: the references
	// still name runs, and the name is no longer unique.
	for _, child := range []string{"tasks", "run_plans"} {
		var parent string
		if err := h.db.SQL().QueryRow(`SELECT "table" FROM pragma_foreign_key_list(?)`, child).Scan(&parent); err != nil || parent != "runs" {
			t.Errorf("%s references %q (%v), want runs", child, parent, err)
		}
	}
	var problems int
	if err := h.db.SQL().QueryRow(`SELECT COUNT(*) FROM pragma_foreign_key_check`).Scan(&problems); err != nil || problems != 0 {
		t.Errorf("foreign key check: %d problems, %v", problems, err)
	}
	if _, err := h.db.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('R2', 'old', 'x', 'succeeded', 'test', ?)`, now); err != nil {
		t.Errorf("a second run named old: %v", err)
	}
}
