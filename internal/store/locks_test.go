package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/store"
)

const truncateChildEnv = "AGORA_STORE_TEST_TRUNCATE"

// truncateChild runs a TRUNCATE checkpoint of the database at path, as another process, and
// prints SQLite's busy flag: 1 when a reader of this database held it back.
func truncateChild(path string) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(200)")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer db.Close()
	var busy, logged, done int
	if err := db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &done); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("busy", busy)
}

// TestOpen_AgainKeepsTheProcesssLocks: Open made the files private by opening
// and closing the database, -wal and -shm, and closing any descriptor of a file drops every
// POSIX lock the process holds on it: a process opening a database it already had open (a
// handoff's, a checkpointer's) silently lost its read locks, its -shm marks among them (a
// WAL another process could then restart or re-initialise under its readers). Here a reader's
// snapshot must hold back another process's TRUNCATE checkpoint after the database is opened
// again; it did not before.
func TestOpen_AgainKeepsTheProcesssLocks(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path, testMigrations)
	insert := func(name string) {
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec("INSERT INTO things (name) VALUES (?)", name)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	insert("a")
	reader, err := db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	defer reader.ExecContext(context.Background(), "ROLLBACK")
	var n int
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM things").Scan(&n); err != nil {
		t.Fatal(err)
	}
	insert("b") // a frame past the reader's snapshot: a TRUNCATE must wait for the reader

	checkpoint := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), truncateChildEnv+"="+path)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the checkpointing process: %v (%s)", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := checkpoint(); got != "busy 1" {
		t.Fatalf("before the second open: another process's TRUNCATE said %q, want busy 1", got)
	}
	again, err := store.Open(ctx, path, testMigrations)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if got := checkpoint(); got != "busy 1" {
		t.Fatalf("after the database was opened again in this process, another process's TRUNCATE said %q: the reader's locks were dropped", got)
	}
}
