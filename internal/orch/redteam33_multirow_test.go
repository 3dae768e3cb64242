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

// TestRedTeam33_DuplicateKeyAcrossChunks: 868d33c refuses a multi-row chunk that names one
// key twice, but a batch is written in chunks (32, 8, then single rows) and the guard looked
// inside one chunk only: a key in the big chunk and again in a later chunk or single row, or
// twice among the single rows, was written twice, the last row winning, silently, so a
// batch that ended one attempt twice (or wrote one task's row twice) still committed with
// the row saying whichever came last. Failed before: each case below committed without an
// error. Now the whole batch's keys are compared.
func TestRedTeam33_DuplicateKeyAcrossChunks(t *testing.T) {
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
	const run, n = "run-dup2", bigChunk + smallChunk + 3
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
	for _, c := range []struct {
		name      string
		rows      int
		dup, orig int
	}{
		{"big chunk then a single row", bigChunk + 1, bigChunk, 0},
		{"big chunk then the small chunk", bigChunk + smallChunk, bigChunk + 3, 5},
		{"small chunk then a single row", bigChunk + smallChunk + 1, bigChunk + smallChunk, bigChunk + 1},
		{"two single rows", 2, 1, 0},
		{"two single rows after the chunks", n, n - 1, n - 2},
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
				t.Fatalf("a batch naming task %d twice (rows %d and %d): %v, want it refused", c.orig, c.orig, c.dup, err)
			}
		})
		t.Run("attempts/"+c.name, func(t *testing.T) {
			err := db.Tx(ctx, func(tx *sql.Tx) error {
				return writeChunked(ctx, tx, &st.endAttempts, c.rows, &args, func(a []any, i int) []any {
					return append(a, fmt.Sprint("end", i), "", "ended", "", "", fmt.Sprint("d", key(i)))
				})
			})
			if err == nil || !strings.Contains(err.Error(), "same key") {
				t.Fatalf("a batch ending attempt d%d twice (rows %d and %d): %v, want it refused", c.orig, c.orig, c.dup, err)
			}
		})
	}
	// A batch of distinct keys over every chunk size still goes through, twice in a row (the
	// keys seen are forgotten between batches).
	for range 2 {
		err = db.Tx(ctx, func(tx *sql.Tx) error {
			return writeChunked(ctx, tx, &st.updateTasks, n, &args, func(a []any, i int) []any {
				return append(a, "running", 1, 0, fmt.Sprint("d", i), 0, "", "", "", "", "", false, "", run, i)
			})
		})
		if err != nil {
			t.Fatalf("a batch of distinct keys: %v", err)
		}
	}
	var changed int
	if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM attempts WHERE run_id = ? AND state != 'live'`, run).Scan(&changed); err != nil {
		t.Fatal(err)
	}
	if changed != 0 {
		t.Fatalf("%d attempt rows changed by refused commits", changed)
	}
}
