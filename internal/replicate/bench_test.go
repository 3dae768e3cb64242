package replicate_test

import (
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkReplicationLag appends one audit entry per transaction at 1,000 a second to an
// agora.db-shaped log (audit's own schema and Append, preloaded with 20,000 entries, plus
// AGORA_BENCH_LAG_MB MiB of other rows, default 0) for b.N appends, replicated with lag 1s to
// the shared versitygw, and reports the p50/p99/max lag from each commit to the moment the
// sync holding it finished uploading (the replicator's Replicated time, polled every
// millisecond). Baselines in the same run: mode=none, the same appends with no replicator
// (append-p99-ms compares what a writer pays); mode=every-page, a replicator whose every look
// reads every page (how it worked before it read the WAL's frames).
//
//	AGORA_BENCH_LAG_MB=1024 go test -run '^$' -bench ReplicationLag -benchtime 5000x ./internal/replicate
func BenchmarkReplicationLag(b *testing.B) {
	padMB, _ := strconv.Atoi(os.Getenv("AGORA_BENCH_LAG_MB"))
	for _, mode := range []string{"none", "frames", "every-page"} {
		on := mode != "none"
		b.Run("mode="+mode, func(b *testing.B) {
			_, _, c := bucket(b)
			ctx := b.Context()
			path := filepath.Join(b.TempDir(), "agora.db")
			db, err := store.Open(ctx, path, audit.Migrations)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			log := audit.New(time.Now)
			appendOne := func(i int) {
				err := db.Tx(ctx, func(tx *sql.Tx) error {
					_, err := log.Append(ctx, tx, audit.Entry{Actor: "bench", Kind: "dispatch.started", Subject: "dispatch/" + strconv.Itoa(i),
						Details: map[string]any{"target": "local", "capability": "repo-tools"}})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			for i := range 20000 {
				appendOne(i)
			}
			pad(b, db, padMB)
			var r *replicate.Replicator
			if on {
				o := replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Second}
				if mode == "every-page" {
					r, err = replicate.StartEveryPage(ctx, o)
				} else {
					r, err = replicate.Start(ctx, o)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			commits := make([]time.Time, 0, b.N)
			var appendTimes []time.Duration
			lags := make([]time.Duration, 0, b.N)
			next := 0 // the first commit not yet known replicated
			var seen time.Time
			poll := func(now time.Time) {
				if r == nil {
					return
				}
				s := r.Status()
				if !s.Replicated.After(seen) {
					return
				}
				seen = s.Replicated
				for next < len(commits) && !commits[next].After(seen) {
					lags = append(lags, now.Sub(commits[next]))
					next++
				}
			}
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				t0 := time.Now()
				appendOne(20000 + i)
				t1 := time.Now()
				appendTimes = append(appendTimes, t1.Sub(t0))
				commits = append(commits, t1)
				// Pace to 1,000 a second, polling the replicator meanwhile.
				for due := start.Add(time.Duration(i+1) * time.Millisecond); time.Now().Before(due); {
					poll(time.Now())
					time.Sleep(200 * time.Microsecond)
				}
			}
			if r != nil {
				for deadline := time.Now().Add(30 * time.Second); next < len(commits) && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					poll(time.Now())
				}
				if next < len(commits) {
					b.Fatalf("%d of %d commits never replicated", len(commits)-next, len(commits))
				}
				r.Close(ctx)
			}
			b.StopTimer()
			slices.Sort(appendTimes)
			b.ReportMetric(float64(len(commits))/time.Since(start).Seconds(), "appends/s")
			b.ReportMetric(ms(appendTimes[len(appendTimes)*99/100]), "append-p99-ms")
			if len(lags) > 0 {
				slices.Sort(lags)
				b.ReportMetric(ms(lags[len(lags)/2]), "lag-p50-ms")
				b.ReportMetric(ms(lags[len(lags)*99/100]), "lag-p99-ms")
				b.ReportMetric(ms(lags[len(lags)-1]), "lag-max-ms")
			}
			if st, err := os.Stat(path); err == nil {
				b.ReportMetric(float64(st.Size())/(1<<20), "db-MiB")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pad adds mb MiB of 4 KiB random rows in a table of their own: a large home's database, whose
// pages an append does not touch.
func pad(b *testing.B, db *store.DB, mb int) {
	if mb <= 0 {
		return
	}
	if err := db.Tx(b.Context(), func(tx *sql.Tx) error {
		if _, err := tx.Exec("CREATE TABLE pad (v BLOB)"); err != nil {
			return err
		}
		v := make([]byte, 4000)
		for range mb * 256 {
			rand.Read(v)
			if _, err := tx.Exec("INSERT INTO pad (v) VALUES (?)", v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRestore restores a database of AGORA_BENCH_RESTORE_MB MiB (default 256) of 4 KiB
// rows from the shared versitygw: download, checks, page writes, fsync and SQLite's integrity
// check. Baselines in the same run: copy=local, SQLite's own VACUUM INTO of the same
// database to local disk; copy=plain-get, the replica's objects downloaded from the same
// server into one local file with nothing checked or applied.
//
//	AGORA_BENCH_RESTORE_MB=1024 go test -run '^$' -bench Restore -benchtime 1x ./internal/replicate
func BenchmarkRestore(b *testing.B) {
	mb := 256
	if v, err := strconv.Atoi(os.Getenv("AGORA_BENCH_RESTORE_MB")); err == nil && v > 0 {
		mb = v
	}
	_, _, c := bucket(b)
	ctx := b.Context()
	path := filepath.Join(b.TempDir(), "agora.db")
	db, err := store.Open(ctx, path, schema)
	if err != nil {
		b.Fatal(err)
	}
	row := make([]byte, 4000)
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		for n := range mb << 8 {
			rand.Read(row)
			if _, err := tx.Exec("INSERT INTO t (n, v) VALUES (?, ?)", n, row); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	r, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	size := float64(st.Size()) / (1 << 20)
	b.Run("copy=local-vacuum-into", func(b *testing.B) {
		for b.Loop() {
			out := filepath.Join(b.TempDir(), "copy.db")
			if _, err := db.SQL().ExecContext(ctx, "VACUUM INTO ?", out); err != nil {
				b.Fatal(err)
			}
			os.Remove(out)
		}
		b.ReportMetric(size, "db-MiB")
	})
	// The same bytes from the same server with none of restore's work: every object of the
	// replica downloaded in order and written to one local file, fsynced.
	b.Run("copy=plain-get-from-s3", func(b *testing.B) {
		for b.Loop() {
			names, err := c.List(ctx, "replica/agora/")
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range names {
				body, _, err := c.Get(ctx, n, "", 1<<30)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(body); err != nil {
					b.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
			os.Remove(f.Name())
		}
		b.ReportMetric(size, "db-MiB")
	})
	b.Run("copy=restore-from-s3", func(b *testing.B) {
		for b.Loop() {
			out := filepath.Join(b.TempDir(), "agora.db")
			if _, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: out}); err != nil {
				b.Fatal(err)
			}
			os.Remove(out)
		}
		b.ReportMetric(size, "db-MiB")
	})
	db.Close()
}

// BenchmarkPrune_Authenticate100 plans a prune of 100 generations of a small database on the
// shared versitygw. keep=1 authenticates the 99 older generations one by one (each one's first
// segment, so that only this home's are removed, owner.go) after the newest whole one;
// baseline keep=100: every generation's first sync read and checked as whole, which a prune
// of a replica with fewer whole generations than keep has always done. Target: ≤ 1 s.
//
//	go test -run '^$' -bench Prune_Authenticate100 -benchmem -count 5 ./internal/replicate
func BenchmarkPrune_Authenticate100(b *testing.B) {
	_, _, c := bucket(b)
	path := filepath.Join(b.TempDir(), "agora.db")
	db, err := store.Open(b.Context(), path, audit.Migrations)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for range 100 {
		r, err := replicate.Start(b.Context(), replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Close(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	for _, keep := range []int{1, 100} {
		b.Run("keep="+strconv.Itoa(keep), func(b *testing.B) {
			for b.Loop() {
				plan, err := replicate.PlanPrune(b.Context(), pruneOpts(c, keep))
				if err != nil || len(plan.Remove)+len(plan.Kept) != 100 {
					b.Fatalf("plan: %d removed, %d kept, %v", len(plan.Remove), len(plan.Kept), err)
				}
			}
		})
	}
}
