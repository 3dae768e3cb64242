package orch

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/store"
)

// TestWriteChunked writes n+2 task rows, n task updates, attempt inserts and attempt ends through the
// multi-row statements, for counts on and around the chunk sizes, each row with values of
// its own in every column, and reads every row back: a chunk boundary that skipped, repeated
// or shifted a row, or a column bound to another's place, shows as a wrong row.
func TestWriteChunked(t *testing.T) {
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
	for _, n := range []int{0, 1, smallChunk - 1, smallChunk, smallChunk + 1, bigChunk - 1, bigChunk, bigChunk + 1, bigChunk + smallChunk + 3, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			run := fmt.Sprintf("run-%d", n)
			var args []any
			err := db.Tx(ctx, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES (?, ?, 'd', 'running', 'a', 'now')`, run, run); err != nil {
					return err
				}
				// Two rows past the last updated: they must stay as inserted.
				if err := writeChunked(ctx, tx, &st.insertTasks, n+2, &args, func(a []any, i int) []any {
					return append(a, run, i, fmt.Sprint("t", i), "pending", 0, 0, "", 0, "", "", "", "", "", false)
				}); err != nil {
					return err
				}
				if err := writeChunked(ctx, tx, &st.updateTasks, n, &args, func(a []any, i int) []any {
					return append(a, fmt.Sprint("state", i), i+1, i+2, fmt.Sprint(run, "-d", i), i+3, fmt.Sprint("retry", i),
						fmt.Sprint("reason", i), fmt.Sprint("detail", i), fmt.Sprint("q", i), fmt.Sprint("ans", i), i%2 == 1, fmt.Sprint("rev", i), run, i)
				}); err != nil {
					return err
				}
				if err := writeChunked(ctx, tx, &st.insertAttempts, n, &args, func(a []any, i int) []any {
					return append(a, fmt.Sprint(run, "-d", i), run, i, i+1, fmt.Sprint("parent", i), fmt.Sprintf("[%d]", i), fmt.Sprint("fired", i))
				}); err != nil {
					return err
				}
				// End all but the last attempt: the one not ended must stay live.
				return writeChunked(ctx, tx, &st.endAttempts, max(n-1, 0), &args, func(a []any, i int) []any {
					return append(a, fmt.Sprint("end", i), fmt.Sprint("why", i), fmt.Sprint("ended", i), fmt.Sprint("usage", i), fmt.Sprint("verdict", i), fmt.Sprint(run, "-d", i))
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range args {
				if a != nil {
					t.Fatalf("the argument buffer keeps %v after the write", a)
				}
			}
			rows, err := db.SQL().QueryContext(ctx, `SELECT idx, id, state, attempts, failures, dispatch_id, ready_seq, retry_at, reason, detail, question, answer, cancel, review
				FROM tasks WHERE run_id = ? ORDER BY idx`, run)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			seen := 0
			for rows.Next() {
				var idx, attempts, failures, readySeq int
				var id, state, dispatch, retry, reason, detail, q, ans, rev string
				var cancel bool
				if err := rows.Scan(&idx, &id, &state, &attempts, &failures, &dispatch, &readySeq, &retry, &reason, &detail, &q, &ans, &cancel, &rev); err != nil {
					t.Fatal(err)
				}
				got := fmt.Sprint(state, attempts, failures, dispatch, readySeq, retry, reason, detail, q, ans, cancel, rev)
				want := fmt.Sprint("pending", 0, 0, "", 0, "", "", "", "", "", false, "")
				if idx < n {
					want = fmt.Sprint(fmt.Sprint("state", idx), idx+1, idx+2, fmt.Sprint(run, "-d", idx), idx+3, fmt.Sprint("retry", idx),
						fmt.Sprint("reason", idx), fmt.Sprint("detail", idx), fmt.Sprint("q", idx), fmt.Sprint("ans", idx), idx%2 == 1, fmt.Sprint("rev", idx))
				}
				if got != want {
					t.Errorf("task %d: %s, want %s", idx, got, want)
				}
				if id != fmt.Sprint("t", idx) {
					t.Errorf("task %d: id %q", idx, id)
				}
				seen++
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if seen != n+2 {
				t.Fatalf("%d task rows, want %d", seen, n+2)
			}
			arows, err := db.SQL().QueryContext(ctx, `SELECT dispatch_id, task_idx, number, state, reason, parent_id, inputs, fired_at, ended_at, usage, verdict
				FROM attempts WHERE run_id = ? ORDER BY task_idx`, run)
			if err != nil {
				t.Fatal(err)
			}
			defer arows.Close()
			seen = 0
			for arows.Next() {
				var d, state, reason, parent, inputs, fired, ended, usage, verdict string
				var idx, number int
				if err := arows.Scan(&d, &idx, &number, &state, &reason, &parent, &inputs, &fired, &ended, &usage, &verdict); err != nil {
					t.Fatal(err)
				}
				got := fmt.Sprint(d, number, parent, inputs, fired, "|", state, reason, ended, usage, verdict)
				want := fmt.Sprint(fmt.Sprint(run, "-d", idx), idx+1, fmt.Sprint("parent", idx), fmt.Sprintf("[%d]", idx), fmt.Sprint("fired", idx), "|")
				if idx < n-1 {
					want += fmt.Sprint(fmt.Sprint("end", idx), fmt.Sprint("why", idx), fmt.Sprint("ended", idx), fmt.Sprint("usage", idx), fmt.Sprint("verdict", idx))
				} else {
					want += "live"
				}
				if got != want {
					t.Errorf("attempt of task %d: %s, want %s", idx, got, want)
				}
				seen++
			}
			if err := arows.Err(); err != nil {
				t.Fatal(err)
			}
			if seen != n {
				t.Fatalf("%d attempt rows, want %d", seen, n)
			}
		})
	}
}
