package orch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/store"
)

// foldAheadLog is a run of two tasks, each fired in one record and ended in the next, as a
// busy engine writes them: record 1 fires task 0, record 2 ends it and fires task 1, record 3
// ends task 1. Each end has a usage.
func foldAheadLog(t *testing.T) *store.DB {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orch.db")
	db, err := store.Open(ctx, path, Migrations(), store.FullSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`INSERT INTO runs(id, name, digest, state, actor, created_at) VALUES ('r', 'n', 'd', 'running', 'a', 'x')`,
		`INSERT INTO tasks(run_id, idx, id, state) VALUES ('r', 0, 't0', 'pending'), ('r', 1, 't1', 'pending')`,
		// Every update of an attempt or a task row a fold makes, counted.
		`CREATE TABLE writes (what TEXT PRIMARY KEY, n INTEGER NOT NULL)`,
		`INSERT INTO writes VALUES ('attempt updates', 0), ('task updates', 0)`,
		`CREATE TRIGGER count_attempt_updates AFTER UPDATE ON attempts BEGIN UPDATE writes SET n = n + 1 WHERE what = 'attempt updates'; END`,
		`CREATE TRIGGER count_task_updates AFTER UPDATE ON tasks BEGIN UPDATE writes SET n = n + 1 WHERE what = 'task updates'; END`,
	} {
		if _, err := db.SQL().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// aheadEngine opens an engine on foldAheadLog's database (Open folds nothing: the log is
// written after it) and writes the records.
func aheadEngine(t *testing.T) (*Engine, *store.DB) {
	t.Helper()
	db := foldAheadLog(t)
	e, err := Open(context.Background(), db, audit.New(nil), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeAheadRecords(t, db)
	return e, db
}

func writeAheadRecords(t *testing.T, db *store.DB) {
	t.Helper()
	records := []*logRecord{
		{tasks: []taskImage{{runID: "r", idx: 0, state: "running", attempts: 1, dispatchID: "D0"}},
			inserts: []attemptImage{{dispatchID: "D0", runID: "r", taskIdx: 0, number: 1, inputs: "[]", firedAt: "f0"}}},
		{tasks: []taskImage{{runID: "r", idx: 0, state: "succeeded", attempts: 1, dispatchID: "D0"}, {runID: "r", idx: 1, state: "running", attempts: 1, dispatchID: "D1"}},
			inserts: []attemptImage{{dispatchID: "D1", runID: "r", taskIdx: 1, number: 1, inputs: "[]", firedAt: "f1"}},
			ends:    []endImage{{id: "D0", state: "succeeded", endedAt: "e0", usage: `{"input_tokens":5,"model_calls":1}`}}},
		{tasks: []taskImage{{runID: "r", idx: 1, state: "succeeded", attempts: 1, dispatchID: "D1"}},
			ends: []endImage{{id: "D1", state: "succeeded", endedAt: "e1", usage: `{"input_tokens":7,"model_calls":1}`}}},
	}
	for _, r := range records {
		if _, err := db.SQL().Exec(`INSERT INTO row_log(record) VALUES (?)`, r.encode(nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkAheadReads reads the run as every reader does (the tables and the records left): both
// tasks succeeded, both attempts ended with their usage, the usage summed once.
func checkAheadReads(t *testing.T, when string, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	err := readTx(ctx, db.SQL(), func(q querier, ov *overlay) error {
		counts, total, err := runCounts(ctx, q, ov, "r")
		if err != nil {
			return err
		}
		if total != 2 || len(counts) != 1 || counts["succeeded"] != 2 {
			t.Errorf("%s: counts %v of %d, want both succeeded", when, counts, total)
		}
		u, err := sumUsage(ctx, q, ov, "r")
		if err != nil {
			return err
		}
		if want := (budget.Usage{InputTokens: 12, ModelCalls: 2}); u != want {
			t.Errorf("%s: usage %+v, want %+v", when, u, want)
		}
		for _, id := range []string{"D0", "D1"} {
			a, ok := ov.attempt(id)
			if !ok {
				var state, usage string
				if err := q.QueryRowContext(ctx, `SELECT state, usage FROM attempts WHERE dispatch_id = ?`, id).Scan(&state, &usage); err != nil {
					return err
				}
				a.state, a.usage = state, usage
			}
			if a.state != "succeeded" || a.usage == "" {
				t.Errorf("%s: attempt %s %q with usage %q, want succeeded with one", when, id, a.state, a.usage)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

func foldWrites(t *testing.T, db *store.DB) (attempts, tasks int) {
	t.Helper()
	if err := db.SQL().QueryRow(`SELECT n FROM writes WHERE what = 'attempt updates'`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if err := db.SQL().QueryRow(`SELECT n FROM writes WHERE what = 'task updates'`).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	return attempts, tasks
}

// TestFold_OneRecordAtATimeWritesEachRowOnce folds the log one record at a time, as a busy
// engine's commits do past foldBound. Each fold reads the record after its own: a task the
// next record writes again is left to it, and an attempt the next record ends is inserted
// ended. So each row is written once, as a fold of the three records together writes it,
// not once a record. Between the folds, every reader sees the run as the whole log leaves
// it: the usage of an attempt written ended while its end's record waits is counted once.
func TestFold_OneRecordAtATimeWritesEachRowOnce(t *testing.T) {
	ctx := context.Background()
	e, db := aheadEngine(t)
	checkAheadReads(t, "before any fold", db)
	for i := 1; i <= 3; i++ {
		if err := e.fold(ctx, 1); err != nil {
			t.Fatal(err)
		}
		checkAheadReads(t, "after fold "+string(rune('0'+i)), db)
	}
	var left int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM row_log`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d records left (%v)", left, err)
	}
	if len(e.preApplied) != 0 {
		t.Errorf("the engine still notes %d attempts written ahead of their ends' records", len(e.preApplied))
	}
	// Inserted ended, never updated; each task row updated once, to succeeded.
	if attempts, tasks := foldWrites(t, db); attempts != 0 || tasks != 2 {
		t.Errorf("the folds updated %d attempt rows and %d task rows, want 0 and 2", attempts, tasks)
	}
}

// TestFold_CrashAfterAnEndWrittenAhead: the first record's fold writes its attempt ended from
// the second record, which still waits; then the engine dies. The engine opened next knows
// nothing of it and folds the rest of the log whole: the end is written again, the same
// values, and the usage is summed once.
func TestFold_CrashAfterAnEndWrittenAhead(t *testing.T) {
	ctx := context.Background()
	e, db := aheadEngine(t)
	if err := e.fold(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var state string
	if err := db.SQL().QueryRow(`SELECT state FROM attempts WHERE dispatch_id = 'D0'`).Scan(&state); err != nil || state != "succeeded" {
		t.Fatalf("D0 after the first record's fold: %q %v, want written ended", state, err)
	}
	if _, err := Open(ctx, db, audit.New(nil), nil, Options{}); err != nil {
		t.Fatal(err)
	}
	checkAheadReads(t, "opened again", db)
	var in, calls float64
	if err := db.SQL().QueryRow(`SELECT input_tokens, model_calls FROM run_usage WHERE run_id = 'r'`).Scan(&in, &calls); err != nil || in != 12 || calls != 2 {
		t.Errorf("run_usage after the crash: %v input tokens, %v calls (%v), want 12 and 2", in, calls, err)
	}
}
