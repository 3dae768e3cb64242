package lease

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkFence_Commit is the fence's cost per commit: a one-row SQLite commit (WAL,
// synchronous NORMAL, as agora.db) without a fence and with a leader's open Fence as the
// process's store fence, in the same run.
//
//	go test ./internal/lease -run '^$' -bench 'Fence_' -benchmem -count 5
func BenchmarkFence_Commit(b *testing.B) {
	for _, fenced := range []bool{false, true} {
		name := "nofence"
		if fenced {
			name = "fence"
		}
		b.Run(name, func(b *testing.B) {
			db, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"),
				[]store.Migration{{Name: "t", SQL: `CREATE TABLE t (n INTEGER PRIMARY KEY)`}})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if fenced {
				f := NewFence("agora/leader", time.Hour)
				f.renewed(bootNow())
				defer store.SetFence(f.Check)()
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if err := db.Tx(b.Context(), func(tx *sql.Tx) error {
					_, err := tx.Exec(`INSERT INTO t (n) VALUES (?)`, i)
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
