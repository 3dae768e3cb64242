package audit_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

// fill appends n entries in large transactions.
func fill(tb testing.TB, db *store.DB, n int) { fillWith(tb, db, n, audit.New(nil)) }

// fillWith is fill through l.
func fillWith(tb testing.TB, db *store.DB, n int, l *audit.Log) {
	tb.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		batch := min(5000, n-done)
		entries := make([]audit.Entry, batch)
		for i := range entries {
			entries[i] = benchEntry(done + i)
		}
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := l.AppendAll(ctx, tx, entries)
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
		done += batch
	}
}

func benchEntry(i int) audit.Entry {
	return audit.Entry{Actor: "alice", Kind: "catalog.register", Subject: fmt.Sprintf("capability/c%d", i),
		Details: map[string]any{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}
}

// BenchmarkAppend measures one Append inside a transaction at a fixed log size: batches of
// 100 appends are rolled back, so the size stays put. Flat across sizes means O(log n).
func BenchmarkAppend(b *testing.B) {
	for _, existing := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			db, _ := openDB(b)
			fill(b, db, existing)
			ctx := context.Background()
			l := audit.New(nil)
			var tx *sql.Tx
			n := 0
			for b.Loop() {
				if tx == nil {
					var err error
					if tx, err = db.SQL().BeginTx(ctx, nil); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := l.Append(ctx, tx, benchEntry(n)); err != nil {
					b.Fatal(err)
				}
				if n++; n%100 == 0 {
					tx.Rollback()
					tx = nil
				}
			}
			if tx != nil {
				tx.Rollback()
			}
		})
	}
}

// BenchmarkAppendCommit measures durable appends: 100 per committed transaction.
func BenchmarkAppendCommit(b *testing.B) {
	db, _ := openDB(b)
	ctx := context.Background()
	l := audit.New(nil)
	var tx *sql.Tx
	n := 0
	for b.Loop() {
		if tx == nil {
			var err error
			if tx, err = db.SQL().BeginTx(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.Append(ctx, tx, benchEntry(n)); err != nil {
			b.Fatal(err)
		}
		if n++; n%100 == 0 {
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			tx = nil
		}
	}
	if tx != nil {
		tx.Commit()
	}
}

// BenchmarkExportVerify exports a 10,000-entry bundle, writes and parses it, and verifies it.
func BenchmarkExportVerify(b *testing.B) {
	f := newFixture(b)
	fill(b, f.db, 10_000)
	f.checkpoint(b)
	ctx := context.Background()
	var size int
	for b.Loop() {
		bundle, err := f.cp.Export(ctx, audit.Selection{})
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		if err := verify.WriteBundle(&buf, bundle); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
		parsed, err := verify.ParseBundle(&buf)
		if err != nil {
			b.Fatal(err)
		}
		if rep := verify.Verify(parsed, verify.Options{Key: f.vkey}); !rep.OK {
			b.Fatalf("failed %v", failed(rep))
		}
	}
	b.ReportMetric(float64(size), "bundle-bytes")
}

// BenchmarkVerify verifies a parsed 100,000-entry bundle: the auditor's side alone.
func BenchmarkVerify(b *testing.B) {
	f := newFixture(b)
	fill(b, f.db, 100_000)
	f.checkpoint(b)
	bundle, err := f.cp.Export(context.Background(), audit.Selection{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if rep := verify.Verify(bundle, verify.Options{Key: f.vkey}); !rep.OK {
			b.Fatalf("failed %v", failed(rep))
		}
	}
}

// BenchmarkInclusionProof reads one inclusion proof from stored nodes in a 1,000,000-entry log.
func BenchmarkInclusionProof(b *testing.B) {
	db, _ := openDB(b)
	const n = 1_000_000
	fill(b, db, n)
	ctx := context.Background()
	i := uint64(0)
	for b.Loop() {
		if _, err := audit.InclusionProof(ctx, db.SQL(), i%n, n); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}

// BenchmarkInclusionProofSparse is BenchmarkInclusionProof on a log written with
// Log.SparseTree (as the orchestrator writes orch.db): the nodes below level 4 of each proof
// are computed from a range of leaf hashes read in a second statement.
func BenchmarkInclusionProofSparse(b *testing.B) {
	db, _ := openDB(b)
	const n = 1_000_000
	fillWith(b, db, n, audit.New(nil).SparseTree())
	ctx := context.Background()
	i := uint64(0)
	for b.Loop() {
		if _, err := audit.InclusionProof(ctx, db.SQL(), i%n, n); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}

// BenchmarkAppendAll appends batches of 100 entries with AppendAll, one DURABLE commit per
// batch (synchronous=FULL: the WAL is fsynced), as the orchestrator does; reported per entry.
func BenchmarkAppendAll(b *testing.B) {
	db, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "durable.db"), audit.Migrations, store.FullSync())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fill(b, db, 10000)
	ctx := context.Background()
	l := audit.New(nil)
	entries := make([]audit.Entry, 100)
	for i := range entries {
		entries[i] = benchEntry(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += len(entries) {
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := l.AppendAll(ctx, tx, entries)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatcher64 appends entries from 64 concurrent writers through a [audit.Batcher]
// (each writer waits for its entry's commit, then sends the next), against the ceiling in the
// same run: the same entries appended by AppendAll in transactions of 64, one after another.
// Both on a fresh agora.db (the default synchronous=NORMAL) holding 10,000 entries; reported
// per entry.
func BenchmarkBatcher64(b *testing.B) {
	const writers = 64
	b.Run("batcher", func(b *testing.B) {
		db, _ := openDB(b)
		fill(b, db, 10000)
		bat := audit.NewBatcher(db, audit.New(nil))
		ctx, cancel := context.WithCancel(context.Background())
		var runner sync.WaitGroup
		runner.Go(func() { bat.Run(ctx) })
		defer runner.Wait()
		defer cancel()
		var next atomic.Int64
		b.ResetTimer()
		defer reportCPU(b)()
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
					if err := bat.Append(ctx, benchEntry(int(i))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	b.Run("appendall", func(b *testing.B) {
		db, _ := openDB(b)
		fill(b, db, 10000)
		l := audit.New(nil)
		ctx := context.Background()
		b.ResetTimer()
		defer reportCPU(b)()
		for done := 0; done < b.N; {
			entries := make([]audit.Entry, min(writers, b.N-done))
			for i := range entries {
				entries[i] = benchEntry(done + i)
			}
			if err := db.Tx(ctx, func(tx *sql.Tx) error {
				_, err := l.AppendAll(ctx, tx, entries)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			done += len(entries)
		}
	})
}

// reportCPU reports the process's CPU time (user and system) per op from now to the call of
// the function it returns: on a machine shared with other work, wall time per op says as much
// about the neighbours as about the code, CPU per op much less.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() { b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op") }
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
