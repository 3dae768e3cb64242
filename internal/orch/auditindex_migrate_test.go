package orch_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// The migration "orch audit log indexed by run" on an orch.db written
// before it, by the engine: every entry, node and the tree stay byte for byte, and what reads
// the log by subject stays exact on the new index (the engine's count of an open run's
// entries, which its seal entry states; the purged run's note; List and run bundles' Export
// are checked in internal/audit's TestSubjectKey_QueriesExactOnBothSchemas). Once as an
// ordinary upgrade, once after a child process was killed with SIGKILL inside the
// migration's transaction, its statements run and not committed.

const auditIndexKillEnv = "AGORA_ORCH_AUDIT_INDEX_KILL_CHILD"

const (
	openRunID   = "01KQMIGRATEDOPEN0000000000" // 26 characters, as ULIDs are: "run/" + id is the index key
	purgedRunID = "01KQMIGRATEDPURGED00000000"
)

// beforeAuditIndex is orch.db's migrations before the index changed.
func beforeAuditIndex(t *testing.T) (before []store.Migration, index store.Migration) {
	t.Helper()
	all := orch.Migrations()
	for i, m := range all {
		if m.Name == "orch audit log indexed by run" {
			return all[:i], m
		}
	}
	t.Fatal(`no migration named "orch audit log indexed by run"`)
	return nil, store.Migration{}
}

func TestMigration_AuditIndexedByRun(t *testing.T) {
	if path := os.Getenv(auditIndexKillEnv); path != "" {
		auditIndexKillChild(t, path)
		return
	}
	for _, kill := range []bool{false, true} {
		name := "upgrade"
		if kill {
			name = "killed-in-migration-then-upgrade"
		}
		t.Run(name, func(t *testing.T) {
			path := writeOldOrchDB(t)
			want := logDump(t, path)
			if kill {
				cmd := exec.Command(os.Args[0], "-test.run", "^TestMigration_AuditIndexedByRun$", "-test.count", "1")
				cmd.Env = append(os.Environ(), auditIndexKillEnv+"="+path)
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("the child was not killed: %v\n%s", err, out)
				}
				// The killed transaction left nothing: the old schema, the old index.
				before, _ := beforeAuditIndex(t)
				if v, idx := schemaOf(t, path); v != len(before) || !slices.Contains(idx, "audit_entries_subject") || slices.Contains(idx, "audit_entries_run") {
					t.Fatalf("after the kill: user_version %d, indexes %v; want %d with audit_entries_subject only", v, idx, len(before))
				}
			}
			h := start(t, path, newNoopExec()) // migrates, loads the open run and finishes it
			r := h.wait(openRunID, lifecycle.RunSucceeded)
			if r.ID != openRunID {
				t.Fatalf("resumed run %q", r.ID)
			}
			_, err := h.eng.Status(context.Background(), purgedRunID)
			if !errors.Is(err, orch.ErrNotFound) || !strings.Contains(err.Error(), "purged by retention at") {
				t.Errorf("the purged run after the migration: %v", err)
			}
			h.stop()
			if v, idx := schemaOf(t, path); v != len(orch.Migrations()) || slices.Contains(idx, "audit_entries_subject") || !slices.Contains(idx, "audit_entries_run") {
				t.Errorf("after the upgrade: user_version %d, indexes %v", v, idx)
			}
			got := logDump(t, path)
			for i, table := range []string{"entries", "nodes"} {
				if len(got[i]) < len(want[i]) || !slices.Equal(got[i][:len(want[i])], want[i]) {
					t.Errorf("audit %s written before the migration changed (%d rows before, %d after)", table, len(want[i]), len(got[i]))
				}
			}
			checkSealCount(t, path, openRunID)
		})
	}
}

// writeOldOrchDB makes an orch.db with the migrations before the index changed: one run the
// engine ran to its seal, an open run (its row, tasks and entries as an engine stopped
// mid-run leaves them), entries of a run whose id extends the open run's (the same index
// key, not its entries), and retention's entry for a purged run.
func writeOldOrchDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orch.db")
	before, _ := beforeAuditIndex(t)
	old, err := store.Open(ctx, path, before, store.FullSync())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// Today's engine writes the sealed run: it writes the runs columns the migrations after
	// the index's added, which are lent to the old schema while it runs and taken back after.
	lent := []string{"subagents TEXT NOT NULL DEFAULT ''"}
	for _, col := range lent {
		if _, err := old.SQL().ExecContext(ctx, "ALTER TABLE runs ADD COLUMN "+col); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := orch.Open(ctx, old, audit.New(nil), newNoopExec(), orch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	id := submitTo(t, eng, mkPlan(t, "sealed", 2, spec{ID: "a"}, spec{ID: "b", Deps: []string{"a"}}))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		r, err := eng.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.State == lifecycle.RunSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s", id, r.State)
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, orch.ErrStopped) {
		t.Fatal(err)
	}
	for _, col := range lent {
		if _, err := old.SQL().ExecContext(ctx, "ALTER TABLE runs DROP COLUMN "+strings.Fields(col)[0]); err != nil {
			t.Fatal(err)
		}
	}
	p := mkPlan(t, "open", 2, spec{ID: "x"}, spec{ID: "y", Deps: []string{"x"}})
	const now = "2026-11-25T07:00:00.000000000Z"
	err = old.Tx(ctx, func(tx *sql.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES (?, 'open', ?, 'running', 'test', ?)`, []any{openRunID, p.Digest(), now}},
			{`INSERT INTO run_plans(run_id, plan) VALUES (?, ?)`, []any{openRunID, p.Canonical()}},
			{`INSERT INTO tasks(run_id, idx, id, state, ready_seq) VALUES (?, 0, 'x', 'ready', 1), (?, 1, 'y', 'pending', 0)`, []any{openRunID, openRunID}},
		} {
			if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
		l := audit.New(nil)
		_, err := l.AppendAll(ctx, tx, []audit.Entry{
			{Actor: entry.OrchActor, Kind: entry.RunSubmitted, Subject: entry.Run(openRunID), Details: map[string]any{entry.KeyRunName: "open"}},
			{Actor: entry.OrchActor, Kind: "orch.task.ready", Subject: entry.Task(openRunID, "x"), Details: map[string]any{entry.KeyRunName: "open"}},
			{Actor: entry.OrchActor, Kind: entry.RunSubmitted, Subject: entry.Run(openRunID + "X"), Details: map[string]any{entry.KeyRunName: "other"}},
			{Actor: entry.OrchActor, Kind: "orch.task.ready", Subject: entry.Task(openRunID+"X", "x"), Details: map[string]any{entry.KeyRunName: "other"}},
			{Actor: "retention", Kind: entry.RetentionRunPurged, Subject: entry.Run(purgedRunID), Details: map[string]any{"why": "older than 30d"}},
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// auditIndexKillChild runs the migration's statements in one transaction, as store's
// migrate does, and kills its process before the commit.
func auditIndexKillChild(t *testing.T, path string) {
	ctx := context.Background()
	before, m := beforeAuditIndex(t)
	db, err := store.Open(ctx, path, before, store.FullSync())
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(len(before)+1)); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	})
	t.Fatal("the child outlived its kill")
}

// schemaOf reads path's user_version and the indexes of audit_entries, read-only.
func schemaOf(t *testing.T, path string) (int, []string) {
	t.Helper()
	db, err := store.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.SQL().QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	rows, err := db.SQL().Query(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'audit_entries' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var idx []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, n)
	}
	return v, idx
}

// logDump is every audit entry's columns and bytes, and every stored node, in order.
func logDump(t *testing.T, path string) [2][]string {
	t.Helper()
	db, err := store.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out [2][]string
	for i, q := range []string{
		`SELECT seq || ' ' || at || ' ' || kind || ' ' || subject || ' ' || actor || ' ' || hex(entry) || ' ' || hex(leaf_hash) FROM audit_entries ORDER BY seq`,
		`SELECT id || ' ' || hex(hash) FROM audit_nodes ORDER BY id`,
	} {
		rows, err := db.SQL().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], s)
		}
		rows.Close()
	}
	if len(out[0]) == 0 {
		t.Fatal("no audit entries")
	}
	return out
}

// checkSealCount: the run's orch.run.sealed entry states as many entries as the log holds
// about the run and its tasks before it (the engine counted the ones written before the
// migration through the new index at load), and none of the run whose id extends it.
func checkSealCount(t *testing.T, path, runID string) {
	t.Helper()
	recs, err := func() ([]audit.Record, error) {
		db, err := store.OpenReadOnly(context.Background(), path)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		return audit.List(context.Background(), db.SQL(), audit.ListOptions{})
	}()
	if err != nil {
		t.Fatal(err)
	}
	n, sealed := 0, false
	for _, r := range recs {
		if r.Subject != entry.Run(runID) && !strings.HasPrefix(r.Subject, entry.Run(runID)+"/") {
			continue
		}
		if r.Kind == entry.RunSealed {
			if got := fmt.Sprint(r.Details[entry.KeyEntries]); got != strconv.Itoa(n) {
				t.Errorf("the seal states %v entries, the log holds %d before it", r.Details[entry.KeyEntries], n)
			}
			sealed = true
			break
		}
		n++
	}
	if !sealed || n < 4 {
		t.Errorf("sealed %v after %d entries of run %s", sealed, n, runID)
	}
}
