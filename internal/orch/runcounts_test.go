package orch_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// TestReader_CountsMatchRecount runs three plans of random shapes whose attempts end at
// random (succeeded with usage, failed with usage and retried, asking a question) and checks
// that a Reader's counts and usage (run_counts and run_usage, kept by triggers, with the
// unfolded records on top) equal Engine.Status's, which reads every task: when the runs
// wait for answers with the row log's records unfolded (the engine folds only when it
// stops: each run has a task that always asks, so none is sealed, which would fold at once),
// then against a GROUP BY of the tables once the engine has stopped and folded them, and
// after the engine and the database are opened again. It runs twice: with the records left
// for the engine's stop, and with every commit past the fourth record folding the oldest
// (fold.go), which leaves task rows older than the records and attempts ended ahead of
// theirs.
func TestReader_CountsMatchRecount(t *testing.T) {
	t.Run("folded at stop", func(t *testing.T) { countsMatchRecount(t, 0) })
	t.Run("folded in every commit", func(t *testing.T) { countsMatchRecount(t, 4) })
}

func countsMatchRecount(t *testing.T, foldBound int) {
	path := filepath.Join(t.TempDir(), "orch.db")
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(47, 1))
	used := map[string]budget.Usage{} // by run: what the executor said its attempts used
	exec := newFakeExec(func(a orch.Attempt) orch.Outcome {
		mu.Lock()
		defer mu.Unlock()
		u := &budget.Usage{InputTokens: rng.Int64N(5000), OutputTokens: rng.Int64N(900), CachedTokens: rng.Int64N(50),
			ModelCalls: 1 + rng.Int64N(4), CostUSD: float64(rng.IntN(10_000)) / 10_000}
		r := rng.IntN(10)
		if a.TaskID != "ask" && r != 9 {
			s := used[a.RunID]
			s.InputTokens, s.OutputTokens, s.CachedTokens = s.InputTokens+u.InputTokens, s.OutputTokens+u.OutputTokens, s.CachedTokens+u.CachedTokens
			s.ModelCalls, s.CostUSD = s.ModelCalls+u.ModelCalls, s.CostUSD+u.CostUSD
			used[a.RunID] = s
		}
		switch {
		case a.TaskID == "ask" || r == 9:
			return orch.Outcome{State: lifecycle.TaskNeedsInput, Question: "which?"}
		case r < 6:
			return orch.Outcome{State: lifecycle.TaskSucceeded, Usage: u}
		default:
			return orch.Outcome{State: lifecycle.TaskFailed, Reason: "exit", Detail: "exit 1", Usage: u}
		}
	})
	// checkUsed compares each run's usage as the Reader sums it with the executor's own sum.
	checkUsed := func(when string, ids []string) {
		t.Helper()
		ro, err := store.OpenReadOnly(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			got, err := orch.NewReader(ro.SQL()).Usage(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			want := used[id]
			want.CostUSD = math.Round(want.CostUSD*1e9) / 1e9
			if got == nil || *got != want {
				t.Errorf("%s: run %s: the Reader sums %+v, the executor's attempts used %+v", when, id, got, want)
			}
		}
	}
	db := openDB(t, path)
	eng, err := orch.Open(context.Background(), db, audit.New(nil), exec, orch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orch.SetFoldIdle(eng, time.Hour)
	if foldBound > 0 {
		orch.SetFoldBound(eng, foldBound)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{tb: t, path: path, db: db, eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- eng.Run(ctx) }()
	t.Cleanup(h.stop)

	shapes := rand.New(rand.NewPCG(47, 3)) // the plans' own: rng is the attempts', under mu
	var ids []string
	for k := range 3 {
		tasks := []spec{{ID: "ask"}}
		for i := range 40 {
			s := spec{ID: fmt.Sprintf("t%d", i), Retry: map[string]any{"max_attempts": 2, "initial_backoff": "1ms", "max_backoff": "1ms"}}
			for range shapes.IntN(3) {
				if i > 0 {
					if d := fmt.Sprintf("t%d", shapes.IntN(i)); !slices.Contains(s.Deps, d) {
						s.Deps = append(s.Deps, d)
					}
				}
			}
			tasks = append(tasks, s)
		}
		ids = append(ids, h.submit(mkPlan(t, fmt.Sprintf("random-%d", k), 1+k*3, tasks...)))
	}
	for _, id := range ids {
		// needs_input: nothing of the run is running, ready or waiting to retry (settle).
		h.wait(id, lifecycle.RunNeedsInput)
	}
	var unfolded int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM row_log`).Scan(&unfolded); err != nil || unfolded == 0 {
		t.Fatalf("%d row log records unfolded (%v): the overlay would not be read", unfolded, err)
	}
	checkReader(t, fmt.Sprintf("with %d records unfolded", unfolded), h, ids)
	checkUsed(fmt.Sprintf("with %d records unfolded", unfolded), ids)
	h.stop() // folds every record
	db = openDB(t, path)
	for _, id := range ids {
		checkTables(t, db.SQL(), id)
	}
	db.Close()
	checkUsed("folded", ids)
	h = start(t, path, exec)
	checkReader(t, "opened again", h, ids)
}

// checkReader compares a Reader's counts and usage of each run (over a read-only
// connection, as the web view reads) with Engine.Status's.
func checkReader(t *testing.T, when string, h *harness, ids []string) {
	t.Helper()
	ctx := context.Background()
	ro, err := store.OpenReadOnly(ctx, h.path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r := orch.NewReader(ro.SQL())
	for _, id := range ids {
		want, err := h.eng.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		counts, total, err := r.Counts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if total != want.Total || !cmp.Equal(counts, want.Counts) {
			t.Errorf("%s: run %s: Counts = %v, %d; Status says %v, %d", when, id, counts, total, want.Counts, want.Total)
		}
		u, err := r.Usage(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Usage, u); diff != "" {
			t.Errorf("%s: run %s: Usage differs from Status's (-Status +Reader):\n%s", when, id, diff)
		}
	}
}

// checkTables compares run_counts and run_usage with a GROUP BY and a SUM of run id's rows.
func checkTables(t *testing.T, db *sql.DB, id string) {
	t.Helper()
	want, got := map[string]int{}, map[string]int{}
	scan := func(m map[string]int, q string) {
		rows, err := db.Query(q, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var n int
			if err := rows.Scan(&s, &n); err != nil {
				t.Fatal(err)
			}
			m[s] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	scan(want, `SELECT state, COUNT(*) FROM tasks WHERE run_id = ? GROUP BY state`)
	scan(got, `SELECT state, n FROM run_counts WHERE run_id = ? AND n != 0`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run %s: run_counts differ from a recount of its tasks (-recount +run_counts):\n%s", id, diff)
	}
	var w, g [5]float64
	var n int
	err := db.QueryRow(`SELECT TOTAL(json_extract(usage, '$.input_tokens')), TOTAL(json_extract(usage, '$.output_tokens')),
		TOTAL(json_extract(usage, '$.cached_tokens')), TOTAL(json_extract(usage, '$.model_calls')), TOTAL(json_extract(usage, '$.cost_usd')), COUNT(*)
		FROM attempts WHERE run_id = ? AND usage != ''`, id).Scan(&w[0], &w[1], &w[2], &w[3], &w[4], &n)
	if err != nil {
		t.Fatal(err)
	}
	err = db.QueryRow(`SELECT input_tokens, output_tokens, cached_tokens, model_calls, cost_usd FROM run_usage WHERE run_id = ?`, id).
		Scan(&g[0], &g[1], &g[2], &g[3], &g[4])
	if err != nil && !(n == 0 && err == sql.ErrNoRows) {
		t.Fatal(err)
	}
	for i := range w {
		w[i], g[i] = math.Round(w[i]*1e9)/1e9, math.Round(g[i]*1e9)/1e9
	}
	if w != g {
		t.Errorf("run %s: run_usage %v, a sum of its attempts %v", id, g, w)
	}
}

// TestRunCounts_RandomWrites changes the rows of three runs at random in SQL (tasks added,
// moved between states and deleted; attempts added with or without a usage, given one later
// and deleted), some of the transactions rolled back as a crash would leave them, and
// checks run_counts and run_usage against a recount of the rows after each transaction,
// after the database is opened again, and after a run is purged. The database is created
// before the migration that adds them, with rows in it: the migration's backfill is checked
// too.
func TestRunCounts_RandomWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orch.db")
	all := orch.Migrations()
	before := slices.IndexFunc(all, func(m store.Migration) bool { return m.Name == "run counts and usage" })
	if before < 0 {
		t.Fatal(`no migration named "run counts and usage"`)
	}
	db, err := store.Open(ctx, path, all[:before])
	if err != nil {
		t.Fatal(err)
	}
	runs := []string{"r0", "r1", "r2"}
	states := []string{lifecycle.TaskPending, lifecycle.TaskReady, lifecycle.TaskRunning, lifecycle.TaskSucceeded, lifecycle.TaskFailed, lifecycle.TaskNeedsInput, lifecycle.TaskCancelled}
	rng := rand.New(rand.NewPCG(47, 2))
	next := map[string]int{}
	attempt := 0
	usage := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d,"cached_tokens":%d,"model_calls":%d,"cost_usd":%g}`,
			rng.IntN(9000), rng.IntN(900), rng.IntN(90), 1+rng.IntN(3), float64(rng.IntN(10_000))/10_000)
	}
	// write applies n random changes in one transaction, then commits it or rolls it back.
	write := func(db *store.DB, n int, commit bool) {
		t.Helper()
		tx, err := db.SQL().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			run := runs[rng.IntN(len(runs))]
			var q string
			var args []any
			switch op := rng.IntN(10); {
			case op < 3 || next[run] == 0:
				q, args = `INSERT INTO tasks(run_id, idx, id, state) VALUES (?, ?, ?, ?)`, []any{run, next[run], fmt.Sprintf("t%d", next[run]), states[rng.IntN(len(states))]}
				if commit {
					next[run]++
				} else {
					// A rolled-back insert's position is used again later; the test's own
					// counter must not move.
					args[1] = next[run] + 1_000_000 + rng.IntN(1_000_000)
				}
			case op < 7:
				q, args = `UPDATE tasks SET state = ? WHERE run_id = ? AND idx = ?`, []any{states[rng.IntN(len(states))], run, rng.IntN(next[run])}
			case op < 8:
				q, args = `DELETE FROM tasks WHERE run_id = ? AND idx = ?`, []any{run, rng.IntN(next[run])}
			case op < 9:
				attempt++
				q, args = `INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, usage) VALUES (?, ?, 0, 1, 'succeeded', 'now', ?)`,
					[]any{fmt.Sprintf("d%d", attempt), run, usage()}
			default:
				d := fmt.Sprintf("d%d", 1+rng.IntN(max(attempt, 1)))
				if rng.IntN(2) == 0 {
					q, args = `UPDATE attempts SET usage = ? WHERE dispatch_id = ?`, []any{usage(), d}
				} else {
					q, args = `DELETE FROM attempts WHERE dispatch_id = ?`, []any{d}
				}
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%s %v: %v", q, args, err)
			}
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(db *store.DB, when string) {
		t.Helper()
		for _, run := range runs {
			checkTables(t, db.SQL(), run)
		}
		if t.Failed() {
			t.Fatalf("after %s", when)
		}
	}
	for _, run := range runs {
		if _, err := db.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES (?, ?, 'd', 'running', 't', 'now')`, run, run); err != nil {
			t.Fatal(err)
		}
	}
	write(db, 200, true)
	db.Close()
	db, err = store.Open(ctx, path, all)
	if err != nil {
		t.Fatal(err)
	}
	check(db, "the migration's backfill")
	for i := range 60 {
		write(db, 1+rng.IntN(40), rng.IntN(4) != 0)
		check(db, fmt.Sprintf("transaction %d", i))
	}
	db.Close()
	db, err = store.Open(ctx, path, all)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db, "opening again")
	// A purge deletes a run's rows, then the run: nothing of it is kept.
	for _, q := range []string{`DELETE FROM attempts WHERE run_id = 'r1'`, `DELETE FROM tasks WHERE run_id = 'r1'`, `DELETE FROM runs WHERE id = 'r1'`} {
		if _, err := db.SQL().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	check(db, "the purge")
	var left int
	if err := db.SQL().QueryRow(`SELECT (SELECT COUNT(*) FROM run_counts WHERE run_id = 'r1') + (SELECT COUNT(*) FROM run_usage WHERE run_id = 'r1')`).Scan(&left); err != nil || left != 0 {
		t.Errorf("a purged run keeps %d summary rows (%v), want 0", left, err)
	}
}
