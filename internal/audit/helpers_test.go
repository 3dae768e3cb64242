package audit_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/store"
)

// openDB opens a fresh database with the audit schema in a temp dir.
func openDB(tb testing.TB) (*store.DB, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "agora.db")
	db, err := store.Open(context.Background(), path, audit.Migrations)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db, path
}

// appendN appends n entries, one transaction each, starting their subjects at from.
func appendN(tb testing.TB, db *store.DB, from, n int) {
	tb.Helper()
	l := audit.New(nil)
	for i := from; i < from+n; i++ {
		err := db.Tx(context.Background(), func(tx *sql.Tx) error {
			_, err := l.Append(context.Background(), tx, audit.Entry{
				Actor: "alice", Kind: "catalog.register", Subject: fmt.Sprintf("capability/c%d", i),
				Details: map[string]any{"digest": fmt.Sprintf("sha256:%064d", i)},
			})
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

type fixture struct {
	db     *store.DB
	path   string
	signer note.Signer
	vkey   string
	cp     *audit.Checkpointer
}

// newFixture opens a database and a checkpointer over it with a fresh key and the anchors.
func newFixture(tb testing.TB, anchors ...audit.Anchor) *fixture {
	tb.Helper()
	db, path := openDB(tb)
	s, v := audittest.NewKey(tb)
	f := &fixture{db: db, path: path, signer: s, vkey: v}
	f.cp = f.checkpointer(tb, anchors...)
	return f
}

func (f *fixture) checkpointer(tb testing.TB, anchors ...audit.Anchor) *audit.Checkpointer {
	tb.Helper()
	cp, err := audit.NewCheckpointer(f.db, audit.CheckpointerOptions{
		LogName: "agora.db", Signer: f.signer, VerifierKey: f.vkey, Anchors: anchors,
		Every: 10, Interval: time.Hour,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return cp
}

func (f *fixture) checkpoint(tb testing.TB) *audit.CheckpointResult {
	tb.Helper()
	res, err := f.cp.Checkpoint(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
