package orch_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
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
	r := h.wait("R1", lifecycle.RunSucceeded)
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

// TestMigration_RunIdentity opens an orch.db written while a run's name was unique, with a
// finished run on a repository commit and an open one: the migration keeps both with their
// tasks and plans; the same plan on the same commit still finds the old run, another commit
// starts a second run under the same name, and the name then means the newest.
func TestMigration_RunIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orch.db")
	var before []store.Migration
	for _, m := range orch.Migrations() {
		if m.Name == "runs identified by what they work on" {
			break
		}
		before = append(before, m)
	}
	if len(before) == len(orch.Migrations()) {
		t.Fatal(`no migration named "runs identified by what they work on"`)
	}
	old, err := store.Open(context.Background(), path, before)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('X', 'x', 'd', 'running', 'test', '2026-01-01T00:00:00Z')`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('Y', 'x', 'd', 'running', 'test', '2026-01-01T00:00:00Z')`); err == nil {
		t.Fatal("the old schema took two runs of one name: this is not the schema before the migration")
	}
	old.SQL().Exec(`DELETE FROM runs WHERE id = 'X'`)
	p := mkPlan(t, "nightly", 1, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}})
	q := mkPlan(t, "open", 1, spec{ID: "a"})
	commit := strings.Repeat("a", 40)
	const at = "2026-01-01T00:00:00.000000000Z"
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO runs(id, name, digest, state, actor, repo, revision, created_at, ended_at, sealed_at) VALUES ('R1', 'nightly', ?, 'succeeded', 'test', '/src/app', ?, ?, ?, ?)`, []any{p.Digest(), commit, at, at, at}},
		{`INSERT INTO run_plans(run_id, plan) VALUES ('R1', ?)`, []any{p.Canonical()}},
		{`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id) VALUES ('R1', 0, 'a', 'succeeded', 1, 'D1'), ('R1', 1, 'b', 'succeeded', 1, 'D2')`, nil},
		{`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('R2', 'open', ?, 'running', 'test', ?)`, []any{q.Digest(), at}},
		{`INSERT INTO run_plans(run_id, plan) VALUES ('R2', ?)`, []any{q.Canonical()}},
		{`INSERT INTO tasks(run_id, idx, id, state, ready_seq) VALUES ('R2', 0, 'a', 'ready', 1)`, nil},
	} {
		if _, err := old.SQL().Exec(stmt.sql, stmt.args...); err != nil {
			t.Fatalf("%s: %v", stmt.sql, err)
		}
	}
	old.Close()

	h := start(t, path, newNoopExec())
	if r := h.wait("R2", lifecycle.RunSucceeded); r.Name != "open" || r.Total != 1 {
		t.Errorf("the open run after the migration: %+v", r)
	}
	r1, err := h.eng.Status(t.Context(), "R1")
	if err != nil || r1.Name != "nightly" || r1.Repo != "/src/app" || r1.Revision != commit || r1.Tasks[1].DispatchID != "D2" || r1.Workspace != "" {
		t.Fatalf("the finished run after the migration: %+v, %v", r1, err)
	}
	co := orch.Checkout{Repo: "/src/app", Revision: commit}
	if id, created, err := h.eng.Submit(t.Context(), p, co, "me"); err != nil || created || id != "R1" {
		t.Errorf("the same plan on the same commit: %s created=%v %v, want R1", id, created, err)
	}
	id, created, err := h.eng.Submit(t.Context(), p, orch.Checkout{Repo: "/src/app", Revision: strings.Repeat("b", 40)}, "me")
	if err != nil || !created || id == "R1" {
		t.Fatalf("another commit: %s created=%v %v, want a new run", id, created, err)
	}
	h.wait(id)
	if newest, err := h.eng.Status(t.Context(), "nightly"); err != nil || newest.ID != id || newest.NameRuns != 2 {
		t.Errorf("the name after a second run: %s of %d, %v; want %s of 2", newest.ID, newest.NameRuns, err, id)
	}
}
