package audit_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestRedTeam36_ChunkFailsMidBatch attacks the 32-row audit insert (4460db9): for batches of
// 31, 32, 33 and 64 entries, a row already holding one sequence number (inside the first
// chunk, at its last row, in the tail, in the second chunk) makes the append fail; the
// caller's row and every entry of the batch roll back together, and the next appends
// (same sizes) give a log whose stored root is its leaves' and whose bundle verifies.
func TestRedTeam36_ChunkFailsMidBatch(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t)
	if _, err := f.db.SQL().ExecContext(ctx, `CREATE TABLE own(k INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	st, err := audit.PrepareStatements(ctx, f.db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := audit.New(func() time.Time { return time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC) })
	appendN(t, f.db, 0, 3)
	k := 0
	for _, c := range []struct{ n, clash int }{{31, 30}, {32, 5}, {32, 31}, {33, 32}, {33, 0}, {64, 40}, {64, 63}} {
		before := rowsOf(t, f.db.SQL(), `SELECT COUNT(*) || ' ' || (SELECT size FROM audit_tree) FROM audit_entries`)
		k++
		err := f.db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := l.AppendAllAlongside(ctx, tx, st, alongsideEntries(k, c.n), func() error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO own(k) VALUES (?)`, k); err != nil {
					return err
				}
				size, err := audit.TreeSize(ctx, tx)
				if err != nil {
					return err
				}
				// A row at the batch's clash-th sequence number: the chunk (or single) insert
				// that reaches it hits the primary key.
				_, err = tx.ExecContext(ctx, `INSERT INTO audit_entries(seq, at, kind, subject, actor, entry, leaf_hash) VALUES (?, 'x', 'k', 's', 'a', X'00', X'00')`,
					int64(size)+int64(c.clash))
				return err
			})
			return err
		})
		if err == nil {
			t.Fatalf("%d entries, clash at %d: the append succeeded", c.n, c.clash)
		}
		after := rowsOf(t, f.db.SQL(), `SELECT COUNT(*) || ' ' || (SELECT size FROM audit_tree) FROM audit_entries`)
		if !slices.Equal(after, before) || !slices.Equal(rowsOf(t, f.db.SQL(), `SELECT COUNT(*) FROM own`), []string{"0"}) {
			t.Fatalf("%d entries, clash at %d: entries/tree %v before, %v after; own rows %v", c.n, c.clash, before, after,
				rowsOf(t, f.db.SQL(), `SELECT COUNT(*) FROM own`))
		}
		// The same size appended cleanly right after.
		if err := f.db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := l.AppendAllAlongside(ctx, tx, st, alongsideEntries(k, c.n), func() error { return nil })
			return err
		}); err != nil {
			t.Fatalf("%d entries after the failed one: %v", c.n, err)
		}
	}
	size, err := audit.TreeSize(ctx, f.db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(3 + 31 + 32 + 32 + 33 + 33 + 64 + 64); size != want {
		t.Fatalf("tree size %d, want %d", size, want)
	}
	if got, want := mustRoot(t, f.db, size), rootFromLeaves(t, f.db, size); string(got) != string(want) {
		t.Fatalf("stored root %x, recomputed %x", got, want)
	}
	f.checkpoint(t)
	bundle, err := f.cp.Export(ctx, audit.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, bundle); err != nil {
		t.Fatal(err)
	}
	parsed, err := verify.ParseBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify.Verify(parsed, verify.Options{Key: f.vkey}); !rep.OK {
		t.Fatalf("bundle after the failed chunks: %v", fmt.Sprint(failed(rep)))
	}
}
