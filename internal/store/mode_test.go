package store_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/store"
)

// withUmask runs the test under umask m, the usual 022 by default, so a file SQLite creates
// with the process's default mode would come out 0644.
func withUmask(t *testing.T, m int) {
	t.Helper()
	old := syscall.Umask(m)
	t.Cleanup(func() { syscall.Umask(old) })
}

// modes returns the permission bits of the database and its -wal and -shm files, as they are
// while the database is open and has been written to.
func modes(t *testing.T, path string) map[string]os.FileMode {
	t.Helper()
	out := map[string]os.FileMode{}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		out[filepath.Base(p)] = fi.Mode().Perm()
	}
	return out
}

func write(t *testing.T, db *store.DB) {
	t.Helper()
	err := db.Tx(t.Context(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO things (name) VALUES (?)`, t.Name())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpen_FilesArePrivate: under the usual umask 022 (which would make orch/orch.db 0644),
// the database and the -wal and -shm files SQLite creates beside it are 0600.
func TestOpen_FilesArePrivate(t *testing.T) {
	withUmask(t, 0o022)
	path := filepath.Join(t.TempDir(), "orch.db")
	db := openDB(t, path, testMigrations)
	write(t, db)
	for name, m := range modes(t, path) {
		if m != 0o600 {
			t.Errorf("%s is %04o, want 0600", name, m)
		}
	}
}

// TestOpen_TightensOldFiles: a database an older agora left 0644, with its -wal and -shm, is
// made 0600 when opened, before SQLite reads a byte.
func TestOpen_TightensOldFiles(t *testing.T) {
	withUmask(t, 0o022)
	path := filepath.Join(t.TempDir(), "orch.db")
	// Leave a 0644 database with a live WAL behind, as an older agora did: a raw connection
	// that is still open keeps the -wal and -shm files.
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	if _, err := raw.Exec(`PRAGMA journal_mode=WAL; CREATE TABLE old (x); INSERT INTO old VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := openDB(t, path, testMigrations)
	write(t, db)
	for name, m := range modes(t, path) {
		if m != 0o600 {
			t.Errorf("%s is %04o, want 0600", name, m)
		}
	}
}
