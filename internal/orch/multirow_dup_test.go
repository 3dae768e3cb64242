package orch

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/store"
)

// TestWriteChunkedRefusesDuplicateKey is the attack on the multi-row statements: one chunk
// naming a key twice. An UPDATE ... FROM (VALUES ...) whose list holds a task (or an
// attempt) twice updates it from either row, silently, so the row state would no longer be
// the one the batch's audit entries recorded. The engine never builds such a chunk (a task is
// written once per batch, an attempt ended once); this pins that a chunk that does anyway
// fails the commit, with nothing of it written, instead of picking a row. Failed before the
// guard: each duplicate was written without an error. Inserts need no guard of their own:
// the tables' primary keys refuse a row twice, which this checks too.
func TestWriteChunkedRefusesDuplicateKey(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "orch.db"), Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var st stmts
	if err := st.prepare(ctx, db.SQL()); err != nil {
		t.Fatal(err)
	}
	defer st.close()
	const run, n = "run-dup", bigChunk + smallChunk
	var args []any
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES (?, ?, 'd', 'running', 'a', 'now')`, run, run); err != nil {
			return err
		}
		if err := writeChunked(ctx, tx, &st.insertTasks, n, &args, func(a []any, i int) []any {
			return append(a, run, i, fmt.Sprint("t", i), "pending", 0, 0, "", 0, "", "", "", "", "", false)
		}); err != nil {
			return err
		}
		return writeChunked(ctx, tx, &st.insertAttempts, n, &args, func(a []any, i int) []any {
			return append(a, fmt.Sprint("d", i), run, i, 1, "", "[]", "fired")
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each case: how many rows, and which row names the key of which (the second of a pair).
	for _, c := range []struct {
		name      string
		rows      int
		dup, orig int
	}{
		{"big chunk, first and last", bigChunk, bigChunk - 1, 0},
		{"big chunk, neighbours", bigChunk, 7, 6},
		{"small chunk after a big one", bigChunk + smallChunk, bigChunk + 5, bigChunk + 2},
	} {
		key := func(i int) int {
			if i == c.dup {
				return c.orig
			}
			return i
		}
		t.Run("tasks/"+c.name, func(t *testing.T) {
			err := db.Tx(ctx, func(tx *sql.Tx) error {
				return writeChunked(ctx, tx, &st.updateTasks, c.rows, &args, func(a []any, i int) []any {
					return append(a, fmt.Sprint("state", i), 1, 0, fmt.Sprint("d", i), 0, "", "", "", "", "", false, "", run, key(i))
				})
			})
			if err == nil || !strings.Contains(err.Error(), "same key") {
				t.Fatalf("a chunk naming task %d twice: %v, want it refused", c.orig, err)
			}
			var changed int
			if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE run_id = ? AND state != 'pending'`, run).Scan(&changed); err != nil {
				t.Fatal(err)
			}
			if changed != 0 {
				t.Fatalf("%d task rows changed by the refused commit", changed)
			}
		})
		t.Run("attempts/"+c.name, func(t *testing.T) {
			err := db.Tx(ctx, func(tx *sql.Tx) error {
				return writeChunked(ctx, tx, &st.endAttempts, c.rows, &args, func(a []any, i int) []any {
					return append(a, fmt.Sprint("end", i), "", "ended", "", "", fmt.Sprint("d", key(i)))
				})
			})
			if err == nil || !strings.Contains(err.Error(), "same key") {
				t.Fatalf("a chunk ending attempt d%d twice: %v, want it refused", c.orig, err)
			}
			var changed int
			if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM attempts WHERE run_id = ? AND state != 'live'`, run).Scan(&changed); err != nil {
				t.Fatal(err)
			}
			if changed != 0 {
				t.Fatalf("%d attempt rows changed by the refused commit", changed)
			}
		})
	}
	// Distinct keys in one chunk still go through (the guard compares keys, not rows).
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		return writeChunked(ctx, tx, &st.updateTasks, bigChunk, &args, func(a []any, i int) []any {
			return append(a, "running", 1, 0, fmt.Sprint("d", i), 0, "", "", "", "", "", false, "", run, i)
		})
	})
	if err != nil {
		t.Fatalf("a chunk of distinct keys: %v", err)
	}
	for _, ins := range []struct {
		name string
		c    *chunked
		args func(a []any, i int) []any
	}{
		{"tasks", &st.insertTasks, func(a []any, i int) []any {
			return append(a, run, n+i%2, "x", "pending", 0, 0, "", 0, "", "", "", "", "", false)
		}},
		{"attempts", &st.insertAttempts, func(a []any, i int) []any {
			return append(a, fmt.Sprint("x", i%2), run, 0, 1, "", "[]", "fired")
		}},
	} {
		err := db.Tx(ctx, func(tx *sql.Tx) error { return writeChunked(ctx, tx, ins.c, smallChunk, &args, ins.args) })
		if err == nil {
			t.Errorf("inserting %s rows with one key twice in a chunk: no error", ins.name)
		}
	}
}
