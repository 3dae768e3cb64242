package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/agora-dev/agora/internal/store"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(truncateChildEnv); path != "" {
		truncateChild(path) // TestOpen_AgainKeepsTheProcesssLocks's other process
		return
	}
	goleak.VerifyTestMain(m)
}

var testMigrations = []store.Migration{
	{Name: "things", SQL: `CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);`},
	{Name: "more", SQL: `ALTER TABLE things ADD COLUMN size INTEGER NOT NULL DEFAULT 0;`},
}

func openDB(t testing.TB, path string, migrations []store.Migration) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), path, migrations)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func userVersion(t testing.TB, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOpen_Pragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a b.db") // a space must survive the DSN
	db := openDB(t, path, testMigrations)
	if db.Path() != path {
		t.Errorf("Path = %q, want %q", db.Path(), path)
	}
	var mode string
	var fk, timeout int
	if err := db.SQL().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := db.SQL().QueryRow("PRAGMA foreign_keys").Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := db.SQL().QueryRow("PRAGMA busy_timeout").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	got := []any{mode, fk, timeout}
	if diff := cmp.Diff([]any{"wal", 1, 10000}, got); diff != "" {
		t.Errorf("pragmas (journal_mode, foreign_keys, busy_timeout) mismatch (-want +got):\n%s", diff)
	}
}

func TestOpen_MigrationsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := store.Open(t.Context(), path, testMigrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	if v := userVersion(t, db.SQL()); v != 1 {
		t.Errorf("user_version after one migration = %d, want 1", v)
	}
	if err := db.Tx(t.Context(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO things(name) VALUES ('kept')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Reopening with more migrations applies only the new one; reopening again applies none
	// (a second ALTER TABLE ADD COLUMN would fail).
	for range 3 {
		db := openDB(t, path, testMigrations)
		if v := userVersion(t, db.SQL()); v != 2 {
			t.Errorf("user_version = %d, want 2", v)
		}
		var name string
		var size int
		if err := db.SQL().QueryRow(`SELECT name, size FROM things`).Scan(&name, &size); err != nil || name != "kept" {
			t.Errorf("row after reopen = %q %d, %v", name, size, err)
		}
		db.Close()
	}
}

func TestOpen_RefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	db := openDB(t, path, testMigrations)
	db.Close()
	_, err := store.Open(t.Context(), path, testMigrations[:1])
	if err == nil {
		t.Fatal("Open with fewer migrations than applied succeeded, want a refusal")
	}
	for _, want := range []string{"schema version 2", "newer than this agora (1)", "upgrade agora"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestOpen_BadMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.db")
	bad := append(append([]store.Migration{}, testMigrations[0]), store.Migration{Name: "broken", SQL: "CREATE TABLEX nope"})
	_, err := store.Open(t.Context(), path, bad)
	if err == nil || !strings.Contains(err.Error(), "migration 2 (broken)") {
		t.Fatalf("Open with a broken migration = %v, want an error naming migration 2 (broken)", err)
	}
	// The good first step is kept and the broken one left no trace.
	db := openDB(t, path, testMigrations[:1])
	if v := userVersion(t, db.SQL()); v != 1 {
		t.Errorf("user_version = %d, want 1", v)
	}
}

func TestDB_TxRollsBackOnError(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "tx.db"), testMigrations)
	boom := errors.New("boom")
	err := db.Tx(t.Context(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO things(name) VALUES ('gone')`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx = %v, want boom", err)
	}
	var n int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM things`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows after a failed Tx = %d (%v), want 0", n, err)
	}
}

func TestDB_TxDoesNotRetryOtherErrors(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "tx.db"), testMigrations)
	var calls atomic.Int32
	err := db.Tx(t.Context(), func(tx *sql.Tx) error {
		calls.Add(1)
		_, err := tx.Exec(`INSERT INTO things(name) VALUES ('a'), ('a')`)
		return err
	})
	if !store.IsUniqueViolation(err) || store.IsBusy(err) {
		t.Errorf("Tx error = %v, want a unique violation that is not busy", err)
	}
	if calls.Load() != 1 {
		t.Errorf("fn ran %d times, want 1", calls.Load())
	}
}

// rawDB opens a second, independent pool on the same file without a busy timeout, so its
// statements fail fast with SQLITE_BUSY when another connection holds the write lock.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	t.Cleanup(func() { raw.Close() })
	return raw
}

func TestDB_TxWaitsForWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock.db")
	db := openDB(t, path, testMigrations)
	holder := rawDB(t, path)
	ctx := t.Context()
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO things(name) VALUES ('holder')`); err != nil {
		t.Fatal(err)
	}
	const hold = 300 * time.Millisecond
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(hold)
		conn.ExecContext(context.Background(), "COMMIT")
	}()
	start := time.Now()
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO things(name) VALUES ('waiter')`)
		return err
	})
	waited := time.Since(start)
	<-released
	if err != nil {
		t.Fatalf("Tx while another connection held the write lock: %v", err)
	}
	if waited < hold/2 {
		t.Errorf("Tx finished after %v, before the lock was released (%v)", waited, hold)
	}
	var names []string
	rows, err := db.SQL().Query(`SELECT name FROM things ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	if diff := cmp.Diff([]string{"holder", "waiter"}, names); diff != "" {
		t.Errorf("rows mismatch (-want +got):\n%s", diff)
	}
}

func TestDB_TxRetriesBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	db := openDB(t, path, testMigrations)
	other := rawDB(t, path)
	ctx := t.Context()
	// On its first run fn writes through a second handle that fails fast; Tx's own IMMEDIATE
	// transaction holds the write lock, so that write gets a real SQLITE_BUSY. Tx must roll
	// back, back off and run fn again from the start.
	var calls atomic.Int32
	var firstErr error
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		if calls.Add(1) == 1 {
			_, firstErr = other.ExecContext(ctx, `INSERT INTO things(name) VALUES ('other')`)
			if _, err := tx.Exec(`INSERT INTO things(name) VALUES ('rolled back')`); err != nil {
				return err
			}
			return firstErr
		}
		_, err := tx.Exec(`INSERT INTO things(name) VALUES ('second try')`)
		return err
	})
	if err != nil {
		t.Fatalf("Tx: %v", err)
	}
	if !store.IsBusy(firstErr) {
		t.Fatalf("first attempt error = %v, want SQLITE_BUSY", firstErr)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("fn ran %d times, want 2", got)
	}
	var names []string
	rows, err := db.SQL().Query(`SELECT name FROM things ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	if diff := cmp.Diff([]string{"second try"}, names); diff != "" {
		t.Errorf("rows mismatch (-want +got):\n%s", diff)
	}
}

func TestDB_TxGivesUpOnCancel(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "c.db"), testMigrations)
	ctx, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		calls.Add(1)
		cancel()
		return errors.New("database is locked (simulated)")
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Tx after cancel = %v, want context.Canceled", err)
	}
	if calls.Load() != 1 {
		t.Errorf("fn ran %d times after cancel, want 1", calls.Load())
	}
}

func TestIsBusy(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{errors.New("database is locked"), true},
		{fmt.Errorf("wrapped: %w", errors.New("database is locked")), true},
	}
	for _, tt := range tests {
		if got := store.IsBusy(tt.err); got != tt.want {
			t.Errorf("IsBusy(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if store.IsUniqueViolation(errors.New("UNIQUE constraint failed")) {
		t.Errorf("IsUniqueViolation matched a plain error")
	}
}

func TestDB_TxGivesUpAfterMaxAttempts(t *testing.T) {
	db := openDB(t, filepath.Join(t.TempDir(), "g.db"), testMigrations)
	var calls atomic.Int32
	busy := errors.New("database is locked (simulated)")
	err := db.Tx(t.Context(), func(tx *sql.Tx) error {
		calls.Add(1)
		return busy
	})
	if !errors.Is(err, busy) || !strings.Contains(err.Error(), "stayed locked after 20 attempts") {
		t.Errorf("Tx = %v, want the busy error wrapped with the attempt count", err)
	}
	if calls.Load() != 20 {
		t.Errorf("fn ran %d times, want 20", calls.Load())
	}
}
