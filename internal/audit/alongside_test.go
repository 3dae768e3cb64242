package audit_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// alongsideEntries is a batch of n orch-like entries, every fifth with a nested detail.
func alongsideEntries(round, n int) []audit.Entry {
	var out []audit.Entry
	for i := range n {
		d := map[string]any{"attempt": int64(i), "run_name": "r \u2028 ü"}
		if i%5 == 0 {
			d["usage"] = map[string]any{"input_tokens": int64(i * 3), "z": []any{"a", nil, true}}
		}
		out = append(out, audit.Entry{Actor: "orch", Kind: "orch.task.fired", Subject: fmt.Sprintf("run/r/task/%d-%d", round, i), Details: d})
	}
	return out
}

// TestLog_AppendAllAlongsideMatchesAppendAllWith appends the same batches (below and above the
// size that is encoded on a second goroutine) through AppendAllWith in one database and
// AppendAllAlongside in another, each with a row of the caller's in the same transaction, and
// compares every stored entry, leaf, node, the tree and the caller's rows byte for byte.
func TestLog_AppendAllAlongsideMatchesAppendAllWith(t *testing.T) {
	ctx := t.Context()
	at := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	l := audit.New(func() time.Time { return at })
	dbs := map[string]*store.DB{}
	sts := map[string]*audit.Statements{}
	for _, name := range []string{"with", "alongside"} {
		db, _ := openDB(t)
		if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE own(k INTEGER PRIMARY KEY, v TEXT)`); err != nil {
			t.Fatal(err)
		}
		st, err := audit.PrepareStatements(ctx, db.SQL())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		dbs[name], sts[name] = db, st
	}
	for round, n := range []int{1, 15, 16, 200, 0, 1025, 32, 33, 64} {
		entries := alongsideEntries(round, n)
		var firstWith, firstAlong int64
		if err := dbs["with"].Tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO own(k, v) VALUES (?, ?)`, round, "r"); err != nil {
				return err
			}
			var err error
			firstWith, err = l.AppendAllWith(ctx, tx, sts["with"], entries)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ran := false
		if err := dbs["alongside"].Tx(ctx, func(tx *sql.Tx) error {
			var err error
			firstAlong, err = l.AppendAllAlongside(ctx, tx, sts["alongside"], entries, func() error {
				ran = true
				_, err := tx.ExecContext(ctx, `INSERT INTO own(k, v) VALUES (?, ?)`, round, "r")
				return err
			})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !ran || firstWith != firstAlong {
			t.Fatalf("round %d: rows ran %v; first seq %d alongside, %d with", round, ran, firstAlong, firstWith)
		}
	}
	for _, q := range []string{
		`SELECT seq || ' ' || at || ' ' || kind || ' ' || subject || ' ' || actor || ' ' || hex(entry) || ' ' || hex(leaf_hash) FROM audit_entries ORDER BY seq`,
		`SELECT id || ' ' || hex(hash) FROM audit_nodes ORDER BY id`,
		`SELECT size || ' ' || hex(frontier) FROM audit_tree`,
		`SELECT k || ' ' || v FROM own ORDER BY k`,
	} {
		want, got := rowsOf(t, dbs["with"].SQL(), q), rowsOf(t, dbs["alongside"].SQL(), q)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: %d rows alongside, %d with; equal: %v", q, len(got), len(want), slices.Equal(got, want))
		}
	}
	size, err := audit.TreeSize(ctx, dbs["alongside"].SQL())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustRoot(t, dbs["alongside"], size), rootFromLeaves(t, dbs["alongside"], size); string(got) != string(want) {
		t.Errorf("stored root %x, recomputed %x", got, want)
	}
}

// TestLog_AppendAllAlongsideFails: a failing rows or an entry that cannot be encoded fails the
// append (the caller's transaction rolls back: no entry, no row), whichever size the batch is.
func TestLog_AppendAllAlongsideFails(t *testing.T) {
	ctx := t.Context()
	db, _ := openDB(t)
	if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE own(k INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	st, err := audit.PrepareStatements(ctx, db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := audit.New(nil)
	boom := errors.New("boom")
	for _, n := range []int{3, 40, 100} {
		bad := alongsideEntries(n, n)
		// No canonical form (jcs refuses floats): the last entry, or one in the third chunk,
		// after two chunks were inserted.
		bad[min(n-1, 70)].Details["float"] = 1.5
		for name, c := range map[string]struct {
			entries []audit.Entry
			rowsErr error
		}{"rows fail": {alongsideEntries(n, n), boom}, "entry fails": {bad, nil}, "both": {bad, boom}} {
			err := db.Tx(ctx, func(tx *sql.Tx) error {
				_, err := l.AppendAllAlongside(ctx, tx, st, c.entries, func() error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO own(k) VALUES (?)`, n); err != nil {
						return err
					}
					return c.rowsErr
				})
				return err
			})
			if err == nil || (c.rowsErr != nil && !errors.Is(err, boom)) {
				t.Errorf("%d entries, %s: err %v", n, name, err)
			}
		}
	}
	for _, q := range []string{`SELECT COUNT(*) FROM audit_entries`, `SELECT COUNT(*) FROM own`} {
		if got := rowsOf(t, db.SQL(), q); !slices.Equal(got, []string{"0"}) {
			t.Errorf("%s: %v after failed appends, want 0", q, got)
		}
	}
}
