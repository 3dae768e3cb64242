package orch

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/store"
)

// TestPlainFormsWriteTheSameRows writes the same rows, each holding the defaults of the
// columns the plain forms leave out, once through the full statements and once through the
// plain ones (multirow.go), in two runs, and compares every column of every row, its SQLite
// type included (quote()): the plain forms' literals must store exactly what binding ” and 0
// (and false) stores.
func TestPlainFormsWriteTheSameRows(t *testing.T) {
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
	const n = bigChunk + smallChunk + 3 // every form: big, small and one-row statements
	write := func(run string, plain bool) {
		t.Helper()
		var args []any
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES (?, ?, 'd', 'running', 'a', 'now')`, run, run); err != nil {
				return err
			}
			ins, upd, att := &st.insertTasks, &st.updateTasks, &st.insertAttemptsWhole
			insArgs := func(a []any, i int) []any {
				return append(a, run, i, fmt.Sprint("t", i), "pending", 0, 0, "", i+1000, "", "", "", "", "", false)
			}
			updArgs := func(a []any, i int) []any {
				return append(a, "running", i+1, i%3, fmt.Sprint(run, "-d", i), i+2000, "", "", "", "", "", false, "", run, i)
			}
			attArgs := func(a []any, i int) []any {
				return append(a, fmt.Sprint(run, "-d", i), run, i, i+1, "succeeded", "", "", "[]", fmt.Sprint("fired", i), fmt.Sprint("ended", i), "", "")
			}
			if plain {
				ins, upd, att = &st.insertTasksPlain, &st.updateTasksPlain, &st.insertAttemptsWholePlain
				insArgs = func(a []any, i int) []any { return append(a, run, i, fmt.Sprint("t", i), "pending", i+1000) }
				updArgs = func(a []any, i int) []any {
					return append(a, "running", i+1, i%3, fmt.Sprint(run, "-d", i), i+2000, run, i)
				}
				attArgs = func(a []any, i int) []any {
					return append(a, fmt.Sprint(run, "-d", i), run, i, i+1, "succeeded", "[]", fmt.Sprint("fired", i), fmt.Sprint("ended", i))
				}
			}
			// Two more rows than updated: those keep the inserted row.
			if err := writeChunked(ctx, tx, ins, n+2, &args, insArgs); err != nil {
				return err
			}
			if err := writeChunked(ctx, tx, upd, n, &args, updArgs); err != nil {
				return err
			}
			return writeChunked(ctx, tx, att, n, &args, attArgs)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write("full", false)
	write("plain", true)
	read := func(run, query string) []string {
		t.Helper()
		rows, err := db.SQL().QueryContext(ctx, query, run)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, strings.ReplaceAll(s, "'"+run, "'RUN"))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, q := range []string{
		`SELECT concat_ws(',', quote(run_id), quote(idx), quote(id), quote(state), quote(attempts), quote(failures), quote(dispatch_id),
			quote(ready_seq), quote(retry_at), quote(reason), quote(detail), quote(question), quote(answer), quote(cancel), quote(review))
			FROM tasks WHERE run_id = ? ORDER BY idx`,
		`SELECT concat_ws(',', quote(dispatch_id), quote(run_id), quote(task_idx), quote(number), quote(state), quote(reason),
			quote(parent_id), quote(inputs), quote(fired_at), quote(ended_at), quote(usage), quote(verdict))
			FROM attempts WHERE run_id = ? ORDER BY task_idx`,
	} {
		full, plain := read("full", q), read("plain", q)
		if len(full) != n+2 && len(full) != n {
			t.Fatalf("read %d rows, want %d", len(full), n)
		}
		if !slices.Equal(full, plain) {
			t.Errorf("the plain forms stored other rows:\nfull  %q\nplain %q", full, plain)
		}
	}
}
