package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/store"
)

// AppendAllAlongside inserts each chunk of 32 entries as soon as it is
// encoded, so an entry that cannot be encoded now fails the append after the chunks before it
// were inserted and their nodes stored.

const rt37Batch = 100 // three chunks of 32 and a tail of 4, one at a time

// rt37Entries is batch b of orch-like entries; bad >= 0 gives entry bad a detail with no
// canonical form (jcs refuses floats).
func rt37Entries(b, bad int) []audit.Entry {
	out := alongsideEntries(b, rt37Batch)
	for i := range out {
		out[i].Subject = fmt.Sprintf("run/b%d/task/%03d", b, i)
	}
	if bad >= 0 {
		out[bad].Details["float"] = 1.5
	}
	return out
}

// TestRedTeam37_FailedAlongsideBatchLeavesNoTrace: a batch that fails at its entry 31, 32,
// 70, 95, 96 or 99 (the end of the first chunk, the start of the second, inside the third,
// its end, the tail's start and end: up to 96 entries and their nodes inserted before the
// failure) rolls back whole. A log that took good batches around each failed one holds
// exactly what a log given only the good batches holds: every entry, leaf, node and the tree,
// byte for byte, and the caller's rows; for the full tree and the sparse one.
func TestRedTeam37_FailedAlongsideBatchLeavesNoTrace(t *testing.T) {
	ctx := t.Context()
	at := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	for _, sparse := range []bool{false, true} {
		l := audit.New(func() time.Time { return at })
		if sparse {
			l = l.SparseTree()
		}
		dbs := map[string]*store.DB{}
		sts := map[string]*audit.Statements{}
		for _, name := range []string{"attacked", "reference"} {
			db, _ := openDB(t)
			if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE own(k INTEGER PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			st, err := audit.PrepareStatements(ctx, db.SQL())
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			dbs[name], sts[name] = db, st
		}
		appendBatch := func(name string, b, bad int) error {
			return dbs[name].Tx(ctx, func(tx *sql.Tx) error {
				_, err := l.AppendAllAlongside(ctx, tx, sts[name], rt37Entries(b, bad), func() error {
					_, err := tx.ExecContext(ctx, `INSERT INTO own(k) VALUES (?)`, b)
					return err
				})
				return err
			})
		}
		b := 0
		for _, bad := range []int{31, 32, 70, 95, 96, 99} {
			for _, name := range []string{"attacked", "reference"} {
				if err := appendBatch(name, b, -1); err != nil {
					t.Fatal(err)
				}
			}
			b++
			if err := appendBatch("attacked", 1000+b, bad); err == nil || !strings.Contains(err.Error(), "only integral numbers") {
				t.Fatalf("a batch with entry %d unencodable: err %v", bad, err)
			}
		}
		for _, name := range []string{"attacked", "reference"} {
			if err := appendBatch(name, b, -1); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range []string{
			`SELECT seq || ' ' || at || ' ' || kind || ' ' || subject || ' ' || actor || ' ' || hex(entry) || ' ' || hex(leaf_hash) FROM audit_entries ORDER BY seq`,
			`SELECT id || ' ' || hex(hash) FROM audit_nodes ORDER BY id`,
			`SELECT size || ' ' || hex(frontier) FROM audit_tree`,
			`SELECT k FROM own ORDER BY k`,
		} {
			want, got := rowsOf(t, dbs["reference"].SQL(), q), rowsOf(t, dbs["attacked"].SQL(), q)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("sparse %v: %s: %d rows after failed batches, %d without them; equal: %v", sparse, q, len(got), len(want), slices.Equal(got, want))
			}
		}
		size, err := audit.TreeSize(ctx, dbs["attacked"].SQL())
		if err != nil || size != uint64(7*rt37Batch) {
			t.Fatalf("sparse %v: tree size %d (%v), want %d", sparse, size, err, 7*rt37Batch)
		}
		if got, want := mustRoot(t, dbs["attacked"], size), rootFromLeaves(t, dbs["attacked"], size); string(got) != string(want) {
			t.Errorf("sparse %v: stored root %x, recomputed %x", sparse, got, want)
		}
	}
}

// rt37AlongsideChild appends batches of rt37Batch entries through AppendAllAlongside with a
// row of its own each, every third failing in a later chunk (rolled back), and checkpoints,
// forever (crash_test.go's child in mode "rt37alongside").
func rt37AlongsideChild(ctx context.Context, db *store.DB, l *audit.Log, cp *audit.Checkpointer) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := db.SQL().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS own(k INTEGER PRIMARY KEY)`); err != nil {
		fail(err)
	}
	st, err := audit.PrepareStatements(ctx, db.SQL())
	if err != nil {
		fail(err)
	}
	var b int
	if err := db.SQL().QueryRowContext(ctx, `SELECT COALESCE(MAX(k)+1, 0) FROM own`).Scan(&b); err != nil {
		fail(err)
	}
	b = (b + 2) / 3 * 3 // a fresh multiple of 3: batch numbers never repeat across runs
	for ; ; b++ {
		bad := -1
		if b%3 == 2 {
			bad = 33 + b%67
		}
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := l.AppendAllAlongside(ctx, tx, st, rt37Entries(b, bad), func() error {
				_, err := tx.ExecContext(ctx, `INSERT INTO own(k) VALUES (?)`, b)
				return err
			})
			return err
		})
		if (err != nil) != (bad >= 0) {
			fail(fmt.Errorf("batch %d (bad %d): %v", b, bad, err))
		}
		if _, err := cp.MaybeCheckpoint(ctx); err != nil {
			fail(err)
		}
	}
}

// TestRedTeam37_AlongsideSurvivesKill: a process appending 100-entry batches through
// AppendAllAlongside (every third failing after chunks were inserted) is killed with SIGKILL
// three times; after each, the log verifies as TestLog_SurvivesKill checks it (tree = entries,
// latest checkpoint a prefix, an export verifies), and it holds whole batches only: every
// committed batch's 100 entries with its row, in order, contiguous, one time a batch and times
// never going back; no entry of a failed batch and no row of one.
func TestRedTeam37_AlongsideSurvivesKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agora.db")
	skey, vkey := audittest.NewKeyText(t)
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashKeyEnv+"="+skey, crashPubEnv+"="+vkey, crashModeEnv+"=rt37alongside")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitForEntries(t, path, int64(600*(round+1)))
		time.Sleep(time.Duration(round*3) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		checkAfterCrash(t, path, skey, vkey)
		rt37WholeBatches(t, path)
	}
}

func rt37WholeBatches(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT seq, at, subject FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	batches := map[int]int{}
	var lastAt string
	var i int64
	var prevBatch = -1
	for ; rows.Next(); i++ {
		var seq int64
		var at, subject string
		if err := rows.Scan(&seq, &at, &subject); err != nil {
			t.Fatal(err)
		}
		var b, j int
		if _, err := fmt.Sscanf(subject, "run/b%d/task/%d", &b, &j); err != nil || seq != i {
			t.Fatalf("entry %d: seq %d subject %q (%v)", i, seq, subject, err)
		}
		if b%3 == 2 {
			t.Fatalf("entry %d is of batch %d, which failed", seq, b)
		}
		if j != batches[b] || j > 0 && b != prevBatch || j == 0 && batches[b] != 0 {
			t.Fatalf("entry %d: %q out of order (batch %d had %d entries before it)", seq, subject, b, batches[b])
		}
		ts, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			t.Fatal(err)
		}
		if lastAt != "" {
			prev, _ := time.Parse(time.RFC3339Nano, lastAt)
			if ts.Before(prev) || j > 0 && at != lastAt {
				t.Fatalf("entry %d at %s after %s (index %d in its batch)", seq, at, lastAt, j)
			}
		}
		batches[b]++
		prevBatch, lastAt = b, at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var own []string
	r2, err := db.Query(`SELECT k FROM own ORDER BY k`)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for r2.Next() {
		var k int
		if err := r2.Scan(&k); err != nil {
			t.Fatal(err)
		}
		own = append(own, strconv.Itoa(k))
		if batches[k] != rt37Batch {
			t.Fatalf("batch %d has its row and %d entries", k, batches[k])
		}
	}
	if len(own) != len(batches) || i == 0 {
		t.Fatalf("%d batches of entries (%d entries), %d rows: %v", len(batches), i, len(own), own)
	}
}
