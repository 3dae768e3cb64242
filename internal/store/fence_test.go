package store_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/store"
)

var errFenced = errors.New(`lease agora/leader: not renewed in time; refusing to commit`)

// TestTx_Fenced: with the process's fence refusing, a transaction's writes are rolled back
// and Tx returns the fence's error; once the fence passes again, or is removed, commits go
// through.
func TestTx_Fenced(t *testing.T) {
	dir := t.TempDir()
	a := openDB(t, filepath.Join(dir, "a.db"), testMigrations)
	shut := true
	restore := store.SetFence(func() error {
		if shut {
			return errFenced
		}
		return nil
	})
	defer restore()
	insert := func(db *store.DB, name string) error {
		return db.Tx(t.Context(), func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO things (name) VALUES (?)`, name)
			return err
		})
	}
	if err := insert(a, "x"); !errors.Is(err, errFenced) {
		t.Fatalf("a fenced commit: %v, want the fence's error", err)
	}
	if n := count(t, a); n != 0 {
		t.Fatalf("a fenced commit left %d rows", n)
	}
	shut = false
	if err := insert(a, "y"); err != nil {
		t.Fatalf("with the fence open: %v", err)
	}
	if n := count(t, a); n != 1 {
		t.Fatalf("%d rows after one open commit", n)
	}
	restore()
	shut = true
	if err := insert(a, "z"); err != nil {
		t.Fatalf("after the fence was removed: %v", err)
	}
}

// TestOpen_FencedMigrations: a fenced process cannot even create a database's schema.
func TestOpen_FencedMigrations(t *testing.T) {
	defer store.SetFence(func() error { return errFenced })()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"), testMigrations)
	if err == nil {
		db.Close()
		t.Fatal("a fenced process migrated a database")
	}
	if !errors.Is(err, errFenced) {
		t.Fatalf("fenced migration: %v", err)
	}
}

func count(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.SQL().QueryRow(`SELECT count(*) FROM things`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
