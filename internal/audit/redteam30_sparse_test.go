package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

// Attacks on the sparse audit tree (Log.SparseTree: nodes below level 4 are not
// stored and readers compute them from the leaves) and AppendAllAlongside.

// TestRedTeam30_SparseProofsEqualFullForEverySize: a log written sparsely (in random batches
// through AppendAll, AppendAllAlongside and Append, switching to the full writer and back)
// and a log of the same entries written in full give, for every size 1..5000, the root the
// leaves give (computed in memory, not read back), and, for every size up to 512 and every
// 7th above (the proofs of the sparse log at every size under -race cost CI a minute), the
// same inclusion proof of a random index and consistency proof from a random smaller size,
// each verifying.
func TestRedTeam30_SparseProofsEqualFullForEverySize(t *testing.T) {
	const n = 5000
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(30, 28))
	at := time.Date(2026, 11, 24, 9, 40, 0, 0, time.UTC)
	l := audit.New(func() time.Time { return at })
	full, _ := openDB(t)
	sparse, _ := openDB(t)
	var batches []int
	for total := 0; total < n; {
		b := min(n-total, 1+rng.IntN(60))
		batches = append(batches, b)
		total += b
	}
	for _, db := range []*audit.Log{l, l.SparseTree()} {
		target := full
		if db != l {
			target = sparse
		}
		st, err := audit.PrepareStatements(ctx, target.SQL())
		if err != nil {
			t.Fatal(err)
		}
		for round, b := range batches {
			log := db
			if db != l && round%7 == 3 {
				log = l // the sparse log's writer switches to the full one now and then
			}
			entries := alongsideEntries(round, b)
			if err := target.Tx(ctx, func(tx *sql.Tx) error {
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
	leaves := make([][]byte, n)
	rows, err := sparse.SQL().QueryContext(ctx, `SELECT seq, leaf_hash FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var seq int64
		var h []byte
		if err := rows.Scan(&seq, &h); err != nil {
			t.Fatal(err)
		}
		leaves[seq] = h
	}
	rows.Close()
	if want, got := rowsOf(t, full.SQL(), `SELECT hex(leaf_hash) FROM audit_entries ORDER BY seq`), rowsOf(t, sparse.SQL(), `SELECT hex(leaf_hash) FROM audit_entries ORDER BY seq`); !slices.Equal(want, got) || len(got) != n {
		t.Fatalf("the two logs hold other leaves (%d, %d)", len(want), len(got))
	}
	fact := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r := fact.NewEmptyRange(0)
	eq := func(a, b [][]byte) bool {
		return slices.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
	}
	roots := make([][]byte, n+1)
	for size := uint64(1); size <= n; size++ {
		if err := r.Append(leaves[size-1], nil); err != nil {
			t.Fatal(err)
		}
		root, err := r.GetRootHash(nil)
		if err != nil {
			t.Fatal(err)
		}
		roots[size] = root
		if got := mustRoot(t, sparse, size); string(got) != string(root) {
			t.Fatalf("size %d: sparse root read %x, from the leaves %x", size, got, root)
		}
		if size > 512 && size%7 != 0 {
			continue
		}
		if got := mustRoot(t, full, size); string(got) != string(root) {
			t.Fatalf("size %d: full root read %x, from the leaves %x", size, got, root)
		}
		index := rng.Uint64N(size)
		pf, err := audit.InclusionProof(ctx, full.SQL(), index, size)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := audit.InclusionProof(ctx, sparse.SQL(), index, size)
		if err != nil {
			t.Fatal(err)
		}
		if !eq(pf, ps) {
			t.Fatalf("inclusion of %d in %d: sparse proof differs from full", index, size)
		}
		if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, leaves[index], ps, root); err != nil {
			t.Fatalf("inclusion of %d in %d: %v", index, size, err)
		}
		if size > 1 {
			small := 1 + rng.Uint64N(size-1)
			cf, err := audit.ConsistencyProof(ctx, full.SQL(), small, size)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := audit.ConsistencyProof(ctx, sparse.SQL(), small, size)
			if err != nil {
				t.Fatal(err)
			}
			if !eq(cf, cs) {
				t.Fatalf("consistency %d to %d: sparse proof differs from full", small, size)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, small, size, cs, roots[small], root); err != nil {
				t.Fatalf("consistency %d to %d: %v", small, size, err)
			}
		}
	}
}

// rt30SparseChild appends batches through AppendAllAlongside, each beside a row of its own in
// the same transaction, alternating the sparse and the full writer, and checkpoints, forever
// (the parent kills it with SIGKILL: between an entry's row, its nodes and the caller's row).
func rt30SparseChild(ctx context.Context, db *store.DB, l *audit.Log, cp *audit.Checkpointer) {
	if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS rt30_rows(batch INTEGER PRIMARY KEY, entries INTEGER NOT NULL)`); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	st, err := audit.PrepareStatements(ctx, db.SQL())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		log := l
		if i%4 != 3 {
			log = l.SparseTree()
		}
		entries := alongsideEntries(i, 1+(i*7)%40)
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := log.AppendAllAlongside(ctx, tx, st, entries, func() error {
				_, err := tx.ExecContext(ctx, `INSERT INTO rt30_rows(entries) VALUES (?)`, len(entries))
				return err
			})
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if _, err := cp.MaybeCheckpoint(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// TestRedTeam30_SparseAlongsideSurvivesKill: kill -9 of a process writing batches sparsely
// beside rows of its own (and now and then in full) leaves a log whose tree is the one its
// entries give, whose checkpoint verifies and is a prefix, whose export verifies, and whose
// caller rows count exactly the entries (a batch and its rows commit together).
func TestRedTeam30_SparseAlongsideSurvivesKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agora.db")
	skey, vkey := audittest.NewKeyText(t)
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashKeyEnv+"="+skey, crashPubEnv+"="+vkey, crashModeEnv+"=rt30sparse")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitForEntries(t, path, int64(400*(round+1)))
		time.Sleep(time.Duration(round*5) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		checkAfterCrash(t, path, skey, vkey)
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var rowsSum, entries int64
		err = db.QueryRow(`SELECT (SELECT COALESCE(SUM(entries), 0) FROM rt30_rows), (SELECT COUNT(*) FROM audit_entries)`).Scan(&rowsSum, &entries)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rowsSum != entries {
			t.Fatalf("round %d: the caller's rows count %d entries, the log holds %d", round, rowsSum, entries)
		}
	}
}

// TestRedTeam30_SparseConsistencyAcrossCheckpoints: a sparse log checkpointed at one size and
// anchored at a larger one exports bundles of the older entries whose inclusion proofs (against
// the smaller checkpoint) and consistency proof (to the anchored one) are read with nodes the
// sparse writer left out, and verify offline; at sizes on either side of the sparse levels'
// edges (8, 16 and their neighbours).
func TestRedTeam30_SparseConsistencyAcrossCheckpoints(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, anchor.NewFile(filepath.Join(t.TempDir(), "anchor.jsonl"), nil))
	plain := f.checkpointer(t)
	l := audit.New(nil).SparseTree()
	size := 0
	grow := func(n int) (subjects []string) {
		entries := alongsideEntries(size, n)
		if err := f.db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := l.AppendAll(ctx, tx, entries)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		size += n
		for _, e := range entries {
			subjects = append(subjects, e.Subject)
		}
		return subjects
	}
	for _, step := range [][2]int{{1, 1}, {2, 4}, {4, 1}, {1, 7}, {8, 9}, {15, 2}, {17, 30}, {3, 200}, {60, 5}} {
		older := grow(step[0])
		if _, err := plain.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
		provenAt := size
		grow(step[1])
		if err := f.checkpoint(t).Err(); err != nil {
			t.Fatal(err)
		}
		b, err := plain.Export(ctx, audit.Selection{Subjects: older})
		if err != nil {
			t.Fatal(err)
		}
		if b.Anchored == nil || len(b.Anchored.ConsistencyProof) == 0 {
			t.Fatalf("checkpoint at %d, anchored at %d: the bundle carries no consistency proof", provenAt, size)
		}
		if rep := verify.Verify(b, verify.Options{Key: f.vkey}); !rep.OK {
			t.Fatalf("checkpoint at %d, anchored at %d: %v", provenAt, size, failed(rep))
		}
	}
}
