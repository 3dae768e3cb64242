package audit_test

import (
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// sparseAndFull writes the same entries, in the same batches and with the same clock, to a
// log that stores every node and to one that stores them sparsely (Log.SparseTree) after its
// first batch (a log written before the change, appended to after it), through AppendAll,
// AppendAllAlongside and Append, and returns both.
func sparseAndFull(t *testing.T, batches []int) (full, sparse *store.DB) {
	t.Helper()
	ctx := t.Context()
	at := time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)
	l := audit.New(func() time.Time { return at })
	full, _ = openDB(t)
	sparse, _ = openDB(t)
	for _, db := range []*store.DB{full, sparse} {
		st, err := audit.PrepareStatements(ctx, db.SQL())
		if err != nil {
			t.Fatal(err)
		}
		for round, n := range batches {
			log := l
			if db == sparse && round > 0 {
				log = l.SparseTree()
			}
			entries := alongsideEntries(round, n)
			if err := db.Tx(ctx, func(tx *sql.Tx) error {
				var err error
				switch round % 3 {
				case 0:
					_, err = log.AppendAll(ctx, tx, entries)
				case 1:
					_, err = log.AppendAllAlongside(ctx, tx, st, entries, func() error { return nil })
				default:
					for _, e := range entries {
						if _, err = log.Append(ctx, tx, e); err != nil {
							break
						}
					}
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
	}
	return full, sparse
}

// TestSparseTree_ReadsTheSame: a sparse log stores far fewer node rows, yet its entries, leaf
// hashes and tree are the same bytes as a full log's, and every root, inclusion proof and
// consistency proof read from it is the same as the full log's and verifies against the root
// recomputed from the entries.
func TestSparseTree_ReadsTheSame(t *testing.T) {
	ctx := t.Context()
	full, sparse := sparseAndFull(t, []int{20, 1, 3, 70, 5, 30})
	for _, q := range []string{
		`SELECT seq || ' ' || at || ' ' || hex(entry) || ' ' || hex(leaf_hash) FROM audit_entries ORDER BY seq`,
		`SELECT size || ' ' || hex(frontier) FROM audit_tree`,
	} {
		if want, got := rowsOf(t, full.SQL(), q), rowsOf(t, sparse.SQL(), q); len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: sparse differs from full (%d rows, %d)", q, len(got), len(want))
		}
	}
	nodes := func(db *store.DB) int {
		var n int
		if err := db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_nodes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	size, err := audit.TreeSize(ctx, sparse.SQL())
	if err != nil || size != 129 {
		t.Fatalf("size %d (%v), want 129", size, err)
	}
	// Levels >= 4 of 129 leaves: 8 + 4 + 2 + 1 = 15 nodes, and levels 1-3 of the first 20
	// leaves (written by the full writer): 10 + 5 + 2; the full log has 128 - 1.
	if f, s := nodes(full), nodes(sparse); s != 32 || f != 127 {
		t.Errorf("node rows: full %d, sparse %d; want 127 and 32", f, s)
	}
	for size := uint64(1); size <= 129; size++ {
		root := rootFromLeaves(t, sparse, size)
		for _, db := range []*store.DB{full, sparse} {
			if got := mustRoot(t, db, size); string(got) != string(root) {
				t.Fatalf("size %d: root %x, recomputed from entries %x", size, got, root)
			}
		}
		for index := uint64(0); index < size; index += 1 + size/16 {
			pf, err := audit.InclusionProof(ctx, full.SQL(), index, size)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := audit.InclusionProof(ctx, sparse.SQL(), index, size)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(pf, ps, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatalf("inclusion of %d in %d: sparse proof differs from full", index, size)
			}
			leaf := leafOf(t, sparse, index)
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leaf, ps, root); err != nil {
				t.Fatalf("inclusion of %d in %d: %v", index, size, err)
			}
		}
		for small := uint64(1); small < size; small += 1 + size/8 {
			pf, err := audit.ConsistencyProof(ctx, full.SQL(), small, size)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := audit.ConsistencyProof(ctx, sparse.SQL(), small, size)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(pf, ps, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatalf("consistency %d to %d: sparse proof differs from full", small, size)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, small, size, ps, rootFromLeaves(t, sparse, small), root); err != nil {
				t.Fatalf("consistency %d to %d: %v", small, size, err)
			}
		}
	}
}

// leafOf is entry index's stored leaf hash.
func leafOf(t *testing.T, db *store.DB, index uint64) []byte {
	t.Helper()
	var h []byte
	if err := db.SQL().QueryRowContext(t.Context(), `SELECT leaf_hash FROM audit_entries WHERE seq = ?`, index).Scan(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSparseTree_MissingLeafIsTampered: a node computed from leaves is never computed from
// fewer than all of them. With an entry gone under a node a sparse log did not store, a proof
// that needs it fails with ErrTampered instead of returning a proof; a leaf hash changed under
// such a node makes a proof that does not verify against the root.
func TestSparseTree_MissingLeafIsTampered(t *testing.T) {
	ctx := t.Context()
	_, db := sparseAndFull(t, []int{1, 63})
	root := mustRoot(t, db, 64)
	// Index 12's proof needs the level-3 node over leaves 0-7, which is not stored.
	if _, err := db.SQL().ExecContext(ctx, `UPDATE audit_entries SET leaf_hash = zeroblob(32) WHERE seq = 6`); err != nil {
		t.Fatal(err)
	}
	p, err := audit.InclusionProof(ctx, db.SQL(), 12, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, 12, 64, leafOf(t, db, 12), p, root); err == nil {
		t.Errorf("a proof over a changed leaf hash verified")
	}
	if _, err := db.SQL().ExecContext(ctx, `DELETE FROM audit_entries WHERE seq = 5`); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.InclusionProof(ctx, db.SQL(), 12, 64); !errors.Is(err, audit.ErrTampered) {
		t.Errorf("inclusion proof with entry 5 gone: %v, want ErrTampered", err)
	}
	if _, err := audit.ConsistencyProof(ctx, db.SQL(), 6, 64); !errors.Is(err, audit.ErrTampered) {
		t.Errorf("consistency proof with entry 5 gone: %v, want ErrTampered", err)
	}
}
