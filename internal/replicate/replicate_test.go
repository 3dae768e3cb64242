package replicate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/replicate"
	"github.com/agora-dev/agora/internal/s3"
	"github.com/agora-dev/agora/internal/store"
)

var schema = []store.Migration{{Name: "t", SQL: "CREATE TABLE t (n INTEGER PRIMARY KEY, v BLOB NOT NULL)"}}

const identity = "agora-home-test+1234abcd+AQID"

// testKey authenticates the test home's segments.
var testKey = replicate.SegmentKey([]byte("the test home's secret key, 32 b"))

// openDB is a database opened as agora opens its own (WAL, IMMEDIATE transactions).
func openDB(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), path, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// insert adds rows from..to-1, each with a 600-byte value so the database spans many pages.
func insert(t *testing.T, db *store.DB, from, to int) {
	t.Helper()
	err := db.Tx(t.Context(), func(tx *sql.Tx) error {
		for n := from; n < to; n++ {
			if _, err := tx.Exec("INSERT INTO t (n, v) VALUES (?, ?)", n, []byte(strings.Repeat(fmt.Sprint(n%10), 600))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rows reads the row numbers of a restored database.
func rows(t *testing.T, path string) []int {
	t.Helper()
	db, err := store.OpenReadOnly(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ns []int
	rs, err := db.SQL().QueryContext(t.Context(), "SELECT n FROM t ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var n int
		if err := rs.Scan(&n); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return ns
}

func wantRows(t *testing.T, path string, n int) {
	t.Helper()
	got := rows(t, path)
	if len(got) != n {
		t.Fatalf("restored %d rows, want %d", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("row %d is %d", i, v)
		}
	}
}

// bucket is a fresh bucket on the shared versitygw and a client of it.
func bucket(t testing.TB) (*s3test.Server, s3.Config, *s3.Client) {
	srv := s3test.Shared(t)
	cfg := srv.Bucket(t, false)
	return srv, cfg, srv.Client(t, cfg)
}

// TestReplicate_RoundTrip: a database replicated while it is written, then lost, comes back
// with every committed row; a restore at an earlier time brings back that time's state.
func TestReplicate_RoundTrip(t *testing.T) {
	_, _, c := bucket(t)
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 200)
	r, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	first := r.Status()
	if first.Err != nil || first.Replicated.IsZero() || first.Generation == "" {
		t.Fatalf("status after start: %+v", first)
	}
	insert(t, db, 200, 300)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	mid := r.Status()
	if mid.Seq == first.Seq {
		t.Fatalf("a change shipped no segment: %+v", mid)
	}
	// A sync with nothing changed ships nothing but moves the replicated time on.
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s := r.Status(); s.Seq != mid.Seq || !s.Replicated.After(mid.Replicated) {
		t.Fatalf("an idle sync: %+v after %+v", s, mid)
	}
	// Rows deleted and the database shrunk: the restore must follow it down.
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec("DELETE FROM t WHERE n >= 250")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().ExecContext(ctx, "VACUUM"); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	db.Close()
	os.RemoveAll(dir) // the lost disk

	out := t.TempDir()
	res, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: filepath.Join(out, "agora.db")})
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, filepath.Join(out, "agora.db"), 250)
	if res.Generation != first.Generation || res.Segments < 3 {
		t.Errorf("restored %+v", res)
	}
	// As of the second sync: 300 rows.
	at := filepath.Join(out, "at.db")
	if _, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: at, At: mid.Replicated}); err != nil {
		t.Fatal(err)
	}
	wantRows(t, at, 300)
	// Never over an existing file.
	if _, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: at}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("restore over an existing file: %v", err)
	}
	// Before the first generation there is nothing to restore.
	_, err = replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: filepath.Join(out, "early.db"), At: first.Replicated.Add(-time.Hour)})
	if !errors.Is(err, replicate.ErrNoReplica) {
		t.Errorf("restore before the first generation: %v", err)
	}
}

// TestReplicate_NewGenerationPerStart: a restarted replicator starts a new generation and the
// restore takes the newest one.
func TestReplicate_NewGenerationPerStart(t *testing.T) {
	_, _, c := bucket(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "orch.db")
	db := openDB(t, path)
	insert(t, db, 0, 10)
	r1, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "orch", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, db, 10, 20)
	r2, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "orch", Path: path, Identity: identity, Key: testKey, Lag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Status().Generation == r1.Status().Generation {
		t.Fatal("a restart kept the generation")
	}
	if err := r2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "orch.db")
	res, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "orch", Identity: identity, Key: testKey, Path: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation != r2.Status().Generation {
		t.Errorf("restored generation %s, want the newest %s", res.Generation, r2.Status().Generation)
	}
	wantRows(t, out, 20)
}

// TestReplicate_Loop: the background loop ships a commit within the lag without Sync calls.
func TestReplicate_Loop(t *testing.T) {
	_, _, c := bucket(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	r, err := replicate.Start(ctx, replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	s0 := r.Status()
	insert(t, db, 0, 5)
	committed := time.Now()
	for r.Status().Seq == s0.Seq || !r.Status().Replicated.After(committed) {
		select {
		case <-ctx.Done():
			t.Fatal("the loop never shipped the commit")
		case <-time.After(20 * time.Millisecond):
		}
	}
	out := filepath.Join(t.TempDir(), "agora.db")
	if _, err := replicate.Restore(ctx, replicate.RestoreOptions{Client: c, DB: "agora", Identity: identity, Key: testKey, Path: out}); err != nil {
		t.Fatal(err)
	}
	wantRows(t, out, 5)
}

var _ = context.Background
