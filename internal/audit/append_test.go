package audit_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"pgregory.net/rapid"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

func TestLog_AppendReturnsSeqAndKeepsTree(t *testing.T) {
	db, _ := openDB(t)
	appendN(t, db, 0, 5)
	ctx := t.Context()
	var seq int64
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		var err error
		seq, err = audit.New(nil).Append(ctx, tx, audit.Entry{Actor: "bob", Kind: "catalog.retire", Subject: "env/ci"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if seq != 5 {
		t.Errorf("got seq %d, want 5", seq)
	}
	size, err := audit.TreeSize(ctx, db.SQL())
	if err != nil || size != 6 {
		t.Fatalf("got tree size %d (%v), want 6", size, err)
	}
	if got, want := mustRoot(t, db, 6), rootFromLeaves(t, db, 6); string(got) != string(want) {
		t.Errorf("stored root %x, root recomputed from entries %x", got, want)
	}
}

func TestLog_AppendRollsBackWithTransaction(t *testing.T) {
	db, _ := openDB(t)
	appendN(t, db, 0, 3)
	ctx := t.Context()
	boom := errors.New("boom")
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := audit.New(nil).Append(ctx, tx, audit.Entry{Kind: "catalog.register"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	appendN(t, db, 3, 1)
	if got, want := mustRoot(t, db, 4), rootFromLeaves(t, db, 4); string(got) != string(want) {
		t.Errorf("after a rolled-back append: stored root %x, recomputed %x", got, want)
	}
}

func TestLog_AppendDetectsDeletedEntries(t *testing.T) {
	db, _ := openDB(t)
	appendN(t, db, 0, 4)
	if _, err := db.SQL().Exec(`DELETE FROM audit_entries WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(nil).Append(ctx, tx, audit.Entry{Kind: "catalog.register"})
		return err
	})
	if !errors.Is(err, audit.ErrTampered) {
		t.Errorf("got %v, want ErrTampered", err)
	}
}

// TestLog_CatchesUpEntriesWithoutTree: entries written before the tree existed (or by an older
// agora) get their leaves and nodes at the next append.
func TestLog_CatchesUpEntriesWithoutTree(t *testing.T) {
	db, _ := openDB(t)
	appendN(t, db, 0, 9)
	for _, q := range []string{`DELETE FROM audit_nodes`, `DELETE FROM audit_tree`} {
		if _, err := db.SQL().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, db, 9, 1)
	if got, want := mustRoot(t, db, 10), rootFromLeaves(t, db, 10); string(got) != string(want) {
		t.Errorf("after catch-up: stored root %x, recomputed %x", got, want)
	}
}

func TestLog_CatchUpRefusesForgedLeafHash(t *testing.T) {
	db, _ := openDB(t)
	appendN(t, db, 0, 3)
	for _, q := range []string{`DELETE FROM audit_nodes`, `DELETE FROM audit_tree`, `UPDATE audit_entries SET leaf_hash = zeroblob(32) WHERE seq = 1`} {
		if _, err := db.SQL().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(nil).Append(ctx, tx, audit.Entry{Kind: "catalog.register"})
		return err
	})
	if !errors.Is(err, audit.ErrTampered) {
		t.Errorf("got %v, want ErrTampered", err)
	}
}

// TestLog_ProofsProperty: for any number of random entries, any leaf proves into any tree
// that holds it, and any tree is a prefix of any larger one.
func TestLog_ProofsProperty(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		ctx := context.Background()
		db, err := store.Open(ctx, filepath.Join(dir, fmt.Sprintf("p%d.db", runs)), audit.Migrations)
		if err != nil {
			rt.Fatal(err)
		}
		defer db.Close()
		n := rapid.IntRange(1, 70).Draw(rt, "n")
		l := audit.New(nil)
		err = db.Tx(ctx, func(tx *sql.Tx) error {
			for i := range n {
				_, err := l.Append(ctx, tx, audit.Entry{
					Actor:   rapid.StringN(0, 12, -1).Draw(rt, "actor"),
					Kind:    rapid.SampledFrom([]string{"catalog.register", "dispatch.start", "tool.call"}).Draw(rt, "kind"),
					Subject: fmt.Sprintf("s%d", i),
					Details: map[string]any{"n": rapid.Int64Range(-1<<53, 1<<53).Draw(rt, "detail")},
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			rt.Fatal(err)
		}
		size := uint64(rapid.IntRange(1, n).Draw(rt, "size"))
		index := uint64(rapid.IntRange(0, int(size)-1).Draw(rt, "index"))
		root, err := audit.RootAt(ctx, db.SQL(), size)
		if err != nil {
			rt.Fatal(err)
		}
		p, err := audit.InclusionProof(ctx, db.SQL(), index, size)
		if err != nil {
			rt.Fatal(err)
		}
		var entry []byte
		if err := db.SQL().QueryRow(`SELECT entry FROM audit_entries WHERE seq = ?`, index).Scan(&entry); err != nil {
			rt.Fatal(err)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, verify.LeafHash(entry), p, root); err != nil {
			rt.Fatalf("inclusion of %d in %d: %v", index, size, err)
		}
		size1 := uint64(rapid.IntRange(1, int(size)).Draw(rt, "size1"))
		root1, err := audit.RootAt(ctx, db.SQL(), size1)
		if err != nil {
			rt.Fatal(err)
		}
		cp, err := audit.ConsistencyProof(ctx, db.SQL(), size1, size)
		if err != nil {
			rt.Fatal(err)
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size, cp, root1, root); err != nil {
			rt.Fatalf("consistency %d to %d: %v", size1, size, err)
		}
		if err := os.Remove(db.Path()); err != nil {
			rt.Fatal(err)
		}
	})
}

func mustRoot(tb testing.TB, db *store.DB, size uint64) []byte {
	tb.Helper()
	r, err := audit.RootAt(context.Background(), db.SQL(), size)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// rootFromLeaves recomputes the root of the first size entries from their bytes alone.
func rootFromLeaves(tb testing.TB, db *store.DB, size uint64) []byte {
	tb.Helper()
	rows, err := db.SQL().Query(`SELECT entry FROM audit_entries WHERE seq < ? ORDER BY seq`, size)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var leaves [][]byte
	for rows.Next() {
		var e []byte
		if err := rows.Scan(&e); err != nil {
			tb.Fatal(err)
		}
		leaves = append(leaves, verify.LeafHash(e))
	}
	if uint64(len(leaves)) != size {
		tb.Fatalf("got %d entries, want %d", len(leaves), size)
	}
	return mth(leaves)
}

// mth is RFC 6962's Merkle Tree Hash over leaf hashes.
func mth(leaves [][]byte) []byte {
	h := rfc6962.DefaultHasher
	switch len(leaves) {
	case 0:
		return h.EmptyRoot()
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return h.HashChildren(mth(leaves[:k]), mth(leaves[k:]))
}

func TestLog_AppendAllMatchesAppend(t *testing.T) {
	for _, n := range []int{0, 1, 7, 450, 1025} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db, _ := openDB(t)
			appendN(t, db, 0, 3)
			ctx := t.Context()
			var entries []audit.Entry
			for i := range n {
				entries = append(entries, audit.Entry{Actor: "orch", Kind: "orch.task.fired", Subject: fmt.Sprintf("run/r/task/%d", i),
					Details: map[string]any{"attempt": int64(i)}})
			}
			var first int64
			if err := db.Tx(ctx, func(tx *sql.Tx) error {
				var err error
				first, err = audit.New(nil).AppendAll(ctx, tx, entries)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if first != 3 {
				t.Errorf("first seq %d, want 3", first)
			}
			size, err := audit.TreeSize(ctx, db.SQL())
			if err != nil || size != uint64(3+n) {
				t.Fatalf("tree size %d (%v), want %d", size, err, 3+n)
			}
			if got, want := mustRoot(t, db, uint64(3+n)), rootFromLeaves(t, db, uint64(3+n)); string(got) != string(want) {
				t.Errorf("stored root %x, recomputed %x", got, want)
			}
			// A later single append still extends the same tree.
			appendN(t, db, 3+n, 1)
			if got, want := mustRoot(t, db, uint64(4+n)), rootFromLeaves(t, db, uint64(4+n)); string(got) != string(want) {
				t.Errorf("after Append: stored root %x, recomputed %x", got, want)
			}
		})
	}
}

// TestLog_AppendAllWithMatchesAppendAll appends the same batches, with the same clock, through
// AppendAll in one database and AppendAllWith in another, interleaved with single appends
// from another connection (the prepared tree read must not go stale), and compares every
// stored entry, leaf and node byte for byte.
func TestLog_AppendAllWithMatchesAppendAll(t *testing.T) {
	ctx := t.Context()
	at := time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)
	l := audit.New(func() time.Time { return at })
	plain, _ := openDB(t)
	prepared, path := openDB(t)
	st, err := audit.PrepareStatements(ctx, prepared.SQL())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := store.Open(ctx, path, audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for round, n := range []int{1, 7, 450, 0, 1025} {
		var entries []audit.Entry
		for i := range n {
			entries = append(entries, audit.Entry{Actor: "orch", Kind: "orch.task.fired", Subject: fmt.Sprintf("run/r/task/%d-%d", round, i),
				Details: map[string]any{"attempt": int64(i), "run_name": "r"}})
		}
		var firstPlain, firstPrepared int64
		if err := plain.Tx(ctx, func(tx *sql.Tx) error {
			firstPlain, err = l.AppendAll(ctx, tx, entries)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := prepared.Tx(ctx, func(tx *sql.Tx) error {
			firstPrepared, err = l.AppendAllWith(ctx, tx, st, entries)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if firstPlain != firstPrepared {
			t.Fatalf("round %d: first seq %d with statements, %d without", round, firstPrepared, firstPlain)
		}
		// The same entry from another connection, in both logs.
		e := audit.Entry{Actor: "alice", Kind: "catalog.register", Subject: fmt.Sprintf("capability/c%d", round)}
		for _, db := range []*store.DB{plain, other} {
			if err := db.Tx(ctx, func(tx *sql.Tx) error { _, err := l.Append(ctx, tx, e); return err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, q := range []string{
		`SELECT seq || ' ' || at || ' ' || kind || ' ' || subject || ' ' || actor || ' ' || hex(entry) || ' ' || hex(leaf_hash) FROM audit_entries ORDER BY seq`,
		`SELECT id || ' ' || hex(hash) FROM audit_nodes ORDER BY id`,
		`SELECT size || ' ' || hex(frontier) FROM audit_tree`,
	} {
		want, got := rowsOf(t, plain.SQL(), q), rowsOf(t, prepared.SQL(), q)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: %d rows with statements, %d without; equal: %v", q, len(got), len(want), slices.Equal(got, want))
		}
	}
	size, err := audit.TreeSize(ctx, prepared.SQL())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustRoot(t, prepared, size), rootFromLeaves(t, prepared, size); string(got) != string(want) {
		t.Errorf("stored root %x, recomputed %x", got, want)
	}
}

// rowsOf returns the single text column of every row q selects.
func rowsOf(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q)
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
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
