package replicate_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/store"
)

// dump is the whole table, for comparing a restored database with its source.
func dump(t *testing.T, db *sql.DB) string {
	t.Helper()
	rs, err := db.QueryContext(t.Context(), "SELECT n, hex(v) FROM t ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var b strings.Builder
	for rs.Next() {
		var n int
		var v string
		if err := rs.Scan(&n, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d:%s\n", n, v)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// restoreDump restores the replica into a new file and dumps it.
func restoreDump(t *testing.T, r *replicate.Replicator, o replicate.Options) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := replicate.Restore(t.Context(), replicate.RestoreOptions{Client: o.Client, DB: o.DB, Identity: o.Identity, Key: o.Key, Path: out}); err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenReadOnly(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return dump(t, db.SQL())
}

// startManual is a database of rows rows and its replicator (StartManual: the test syncs),
// closed with the test; with logf the replicator logs through t.
func startManual(t *testing.T, rows int, lag time.Duration, logf, verify bool, restartFrames uint32, checkEvery time.Duration) (*store.DB, *replicate.Replicator, replicate.Options) {
	t.Helper()
	_, _, c := bucket(t)
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, rows)
	o := replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: lag}
	if logf {
		o.Logf = t.Logf
	}
	r, err := replicate.StartManual(t.Context(), o, verify, restartFrames, checkEvery)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return db, r, o
}

// sameAsSource fails t when the replica's restore is not the source database.
func sameAsSource(t *testing.T, r *replicate.Replicator, o replicate.Options, db *store.DB) {
	t.Helper()
	if got, want := restoreDump(t, r, o), dump(t, db.SQL()); got != want {
		t.Fatalf("the restore differs from the source (%d vs %d bytes)", len(got), len(want))
	}
}

// TestReplicate_LookReadsOnlyTheFramesPages: after the generation's first copy, a look reads
// the pages the WAL's new frames name, not the database: a database of thousands of pages
// with a few rows changed ships those pages, every look from frames is checked against a full
// read of the same snapshot, and the restore is the source.
func TestReplicate_LookReadsOnlyTheFramesPages(t *testing.T) {
	ctx := t.Context()
	db, r, o := startManual(t, 5000, time.Hour, false, true, 1<<30, 0)
	for i := range 5 {
		insert(t, db, 5000+i*3, 5000+i*3+3)
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec("UPDATE t SET v = ? WHERE n = ?", []byte("changed"), i*997)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st := replicate.Stats(r)
	if st.Full != 1 || st.Indexed != 5 || st.Unproven != 0 {
		t.Fatalf("looks: %+v; want the first full and five from frames", st)
	}
	if err := r.Sync(ctx); err != nil { // nothing changed: no look reads a page
		t.Fatal(err)
	}
	if st2 := replicate.Stats(r); st2 != st {
		t.Fatalf("an idle look read pages: %+v after %+v", st2, st)
	}
	sameAsSource(t, r, o, db)
}

// TestReplicate_FramesUnderChurn is the index's attack: writers inserting, updating, deleting
// and vacuuming, big transactions that spill, a reader holding old snapshots (so checkpoints
// stop short), another connection checkpointing in every mode, and the replicator restarting
// the WAL every 64 frames. Every look from frames is checked against a full read of the same
// snapshot (a page they missed fails the sync), and the restore is the source.
func TestReplicate_FramesUnderChurn(t *testing.T) {
	ctx := t.Context()
	db, r, o := startManual(t, 500, time.Hour, true, true, 64, 0)
	path := o.Path

	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(50)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var next, ops atomic.Int64
	next.Store(500)
	writer := func(seed uint64) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, seed))
		for !stop.Load() {
			err := db.Tx(ctx, func(tx *sql.Tx) error {
				switch rng.IntN(10) {
				case 0: // a big transaction: spills frames before its commit
					n := next.Add(100)
					for i := n - 99; i <= n; i++ {
						if _, err := tx.Exec("INSERT INTO t (n, v) VALUES (?, ?)", i, make([]byte, 900)); err != nil {
							return err
						}
					}
				case 1, 2:
					_, err := tx.Exec("DELETE FROM t WHERE n % 17 = ?", rng.IntN(17))
					return err
				case 3, 4, 5:
					_, err := tx.Exec("UPDATE t SET v = ? WHERE n % 13 = ?", []byte(fmt.Sprint(rng.Int())), rng.IntN(13))
					return err
				default:
					n := next.Add(1)
					_, err := tx.Exec("INSERT INTO t (n, v) VALUES (?, ?)", n, []byte(strings.Repeat("x", rng.IntN(3000))))
					return err
				}
				return nil
			})
			if err != nil && !stop.Load() {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	wg.Add(3)
	go writer(1)
	go writer(2)
	go func() { // another process's connection: old snapshots and checkpoints of every mode
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 3))
		for !stop.Load() {
			ops.Add(1)
			switch rng.IntN(40) {
			case 0, 6, 7, 8, 9, 10:
				if tx, err := other.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}); err == nil {
					var n int
					tx.QueryRow("SELECT count(*) FROM t").Scan(&n)
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
					tx.Rollback()
				}
			case 1:
				other.Exec("PRAGMA wal_checkpoint(PASSIVE)")
			case 2:
				other.Exec("PRAGMA wal_checkpoint(FULL)")
			case 3:
				other.Exec("PRAGMA wal_checkpoint(RESTART)")
			case 4:
				other.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
			case 5:
				other.Exec("VACUUM")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Churn until there is enough to judge, counted, not timed (a look can take 200 ms under
	// -race on a loaded machine, and a fixed 3 s once gave 12 looks): 25 looks, 200 operations
	// of the other connection (each checkpoint mode a few times), the replicator's own WAL
	// restarts and ten looks from frames. The minute's bound is no timing assertion: looks
	// that never come from frames end there, and fail below.
	start := time.Now()
	for looks := 0; ; looks++ {
		st := replicate.Stats(r)
		if looks >= 25 && ops.Load() >= 200 && st.Restarts > 0 && st.Indexed >= 10 || time.Since(start) > time.Minute {
			break
		}
		time.Sleep(20 * time.Millisecond)
		if err := r.Sync(ctx); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := replicate.Stats(r)
	t.Logf("looks: %+v; %d rows inserted, %d operations of the other connection", st, next.Load(), ops.Load())
	if st.Restarts == 0 || st.Indexed < 10 || st.Indexed <= st.Full {
		t.Errorf("looks: %+v; want the WAL restarted by the replicator and most looks from frames", st)
	}
	sameAsSource(t, r, o, db)
}

// TestReplicate_HeldSnapshotKeepsTheWAL: while the replicator holds its snapshot no one else
// can restart the WAL (a TRUNCATE checkpoint of another connection gives up), so the next
// look is from frames; a WAL restarted behind its back (its snapshot let go) is a history
// it cannot prove, and that look reads every page, shipping the right state.
func TestReplicate_HeldSnapshotKeepsTheWAL(t *testing.T) {
	ctx := t.Context()
	db, r, o := startManual(t, 300, time.Hour, false, true, 1<<30, 0)
	path := o.Path
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(100)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	truncate := func() (busy int) {
		var logged, done int
		if err := other.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &done); err != nil {
			t.Fatal(err)
		}
		return busy
	}
	insert(t, db, 300, 310)
	if busy := truncate(); busy != 1 {
		t.Fatalf("a TRUNCATE checkpoint ran past the replicator's snapshot (busy %d)", busy)
	}
	insert(t, db, 310, 320)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := replicate.Stats(r); st.Unproven != 0 || st.Indexed != 1 {
		t.Fatalf("looks: %+v; want one from frames", st)
	}
	replicate.Unpin(r)
	insert(t, db, 320, 330)
	if busy := truncate(); busy != 0 {
		t.Fatalf("a TRUNCATE checkpoint with no snapshot held: busy %d", busy)
	}
	insert(t, db, 330, 340)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := replicate.Stats(r); st.Unproven != 1 || st.Full != 2 {
		t.Fatalf("looks: %+v; want the restart behind its back read in full", st)
	}
	sameAsSource(t, r, o, db)
}

// TestReplicate_RollingCheckFindsNothing: the rolling check re-reads the pages no frame named
// (here all of them at every look) and finds none the frames missed, across WAL restarts.
func TestReplicate_RollingCheckFindsNothing(t *testing.T) {
	ctx := t.Context()
	db, r, o := startManual(t, 100, time.Hour, false, false, 16, time.Nanosecond)
	for i := range 20 {
		insert(t, db, 100+i*10, 110+i*10)
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st := replicate.Stats(r)
	if st.Indexed < 20 || st.Checked < 20*10 || st.Missed != 0 || st.Restarts == 0 {
		t.Fatalf("looks: %+v; want every look from frames and checking pages, the WAL restarted, nothing missed", st)
	}
	sameAsSource(t, r, o, db)
}

// TestReplicate_RollingCheckShipsAMissedPage: a page shipped with other content than the
// database holds, and named by no frame since (what a WAL reader's bug would leave), is found
// by the rolling check, counted, and shipped: the restore is the source again. The check moves
// through the database in slices, so it is found within a period of looks, not at once.
func TestReplicate_RollingCheckShipsAMissedPage(t *testing.T) {
	ctx := t.Context()
	// 8 looks (lag/2 apart) per period: a slice of an eighth of the pages per look.
	db, r, o := startManual(t, 2000, time.Second, false, false, 1<<30, 4*time.Second)
	replicate.ForgetPage(r, 7)
	for i := range 8 {
		insert(t, db, 2000+i, 2001+i)
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if st := replicate.Stats(r); i == 0 && st.Checked >= 2000/8*2 {
			t.Fatalf("the first look's slice: %+v; want about an eighth of the pages", st)
		}
	}
	if st := replicate.Stats(r); st.Missed != 1 {
		t.Fatalf("looks: %+v; want the one forgotten page found once in a period of looks", st)
	}
	sameAsSource(t, r, o, db)
}

// TestReplicate_RestartThatAppendedIsNoRestart: the replicator's restart commit finds another
// reader on the WAL's last frame (it held back nothing from the checkpoint, but a restart waits
// for it), so the commit appends instead of restarting; the replicator then expects no
// restarted WAL (keeping its marker would let a later foreign restart whose first frame
// matched it pass as proven), and the next looks go on from frames.
func TestReplicate_RestartThatAppendedIsNoRestart(t *testing.T) {
	ctx := t.Context()
	db, r, o := startManual(t, 50, time.Hour, false, true, 4, 0)
	base := replicate.Stats(r).Restarts
	insert(t, db, 50, 60)
	reader, err := db.SQL().Conn(ctx) // a snapshot of the newest state: on the WAL's last frame
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := replicate.Stats(r); st.Restarts != base {
		t.Fatalf("looks: %+v; a restart commit that appended (a reader on the WAL) counted as a restart", st)
	}
	reader.ExecContext(ctx, "ROLLBACK")
	for i := range 5 {
		insert(t, db, 60+i*5, 65+i*5)
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := replicate.Stats(r); st.Unproven != 0 || st.Restarts == base {
		t.Fatalf("looks: %+v; want the WAL restarted once the reader left, every look proven", st)
	}
	sameAsSource(t, r, o, db)
}
