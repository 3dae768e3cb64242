// Package store owns agora's SQLite databases: opening them with the pragmas that make several
// processes safe writers, applying schema migrations, and running short transactions that retry
// when another process holds the write lock.
//
// store runs on the host side only. The worker inside a sandbox never imports it: a worker sees
// only what is mounted into its sandbox.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeout is how long SQLite itself waits for a lock before it reports SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// maxTxAttempts bounds how often [DB.Tx] retries a transaction that lost a lock race.
const maxTxAttempts = 20

// DB is an open agora database. It is safe for concurrent use.
type DB struct {
	sql  *sql.DB
	path string
}

// Migration is one schema step. Migrations are applied in order, each in its own transaction,
// and the database's user_version records how many have run.
type Migration struct {
	Name string
	SQL  string
}

// Open opens (creating if needed) the SQLite database at path in WAL mode, with a busy timeout,
// foreign keys on and IMMEDIATE transactions, then applies migrations. Deferred transactions
// fail with SQLITE_BUSY under concurrent writers despite busy_timeout; IMMEDIATE ones take the
// write lock up front and wait for it instead. The database and its -wal and -shm files are
// mode 0600 (see [private]).
func Open(ctx context.Context, path string, migrations []Migration, opts ...Option) (*DB, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	sync := "NORMAL"
	if o.fullSync {
		sync = "FULL"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	if err := private(path); err != nil {
		return nil, err
	}
	sqldb, err := openCached(dsn, "BEGIN IMMEDIATE")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// One writer at a time is all SQLite allows; a small pool keeps readers concurrent.
	sqldb.SetMaxOpenConns(4)
	sqldb.SetConnMaxIdleTime(time.Minute)
	db := &DB{sql: sqldb, path: path}
	if err := db.migrate(ctx, migrations); err != nil {
		sqldb.Close()
		return nil, err
	}
	return db, nil
}

// OpenReadOnly opens the existing SQLite database at path for reading only (mode=ro,
// query_only), without migrating it: a snapshot of what its writer last committed, read
// while that writer may hold it open (WAL readers do not block it, nor it them).
func OpenReadOnly(ctx context.Context, path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	sqldb, err := openCached("file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode(), "BEGIN")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := sqldb.PingContext(ctx); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return &DB{sql: sqldb, path: path}, nil
}

// private makes the database at path, and the -wal and -shm files beside it when they exist,
// mode 0600, creating the database (empty, 0600 whatever the umask) when it is missing. SQLite
// creates its -wal and -shm files with the database file's own mode (os_unix.c:
// findCreateFileMode, then an fchmod past the umask), so a private database keeps all three
// private; without this, a new database under the usual umask 022 was 0644 and so were the
// WAL files holding its latest commits. Files an older agora left open to others are
// tightened before SQLite reads them. The mode is changed on the opened file, never by name.
//
// An existing file is opened O_PATH only: closing any other descriptor of a file drops every
// POSIX lock this process holds on it, and a process opening a database it has open already
// (a handoff's, a checkpointer's) would lose its connections' locks, the -shm's read marks
// among them, letting another process restart or reset the WAL under its readers.
// An O_PATH descriptor's close releases no lock (the kernel skips it for path-only files).
func private(path string) error {
	// A database created here: no lock of this process can be on a file it creates now.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("open database %s: %w", path, err)
	}
	for i, p := range []string{path, path + "-wal", path + "-shm"} {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if i > 0 && errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open database %s: %w", path, &fs.PathError{Op: "open", Path: p, Err: err})
		}
		err = tighten(fd)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("make database file %s private: %w", p, err)
		}
	}
	return nil
}

// tighten takes group and other permissions off the file fd (O_PATH) names. fchmod refuses an
// O_PATH descriptor; its /proc/self/fd link names the very inode it holds, never a path that
// could have changed since it was opened.
func tighten(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if m := st.Mode & 0o777; m&0o077 != 0 {
		return unix.Fchmodat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), m&^0o077, 0)
	}
	return nil
}

// Option changes how [Open] opens a database.
type Option func(*options)

type options struct{ fullSync bool }

// FullSync makes every commit fsync the WAL before it returns (synchronous=FULL), so a commit
// survives power loss, not only a crash of the process. The orchestrator's database uses it:
// it commits in batches, so the cost is one fsync per batch, not per change.
func FullSync() Option { return func(o *options) { o.fullSync = true } }

// Close closes the database.
func (db *DB) Close() error { return db.sql.Close() }

// Path is the database file's path.
func (db *DB) Path() string { return db.path }

// SQL exposes the pool for read-only queries. Writes MUST go through [DB.Tx].
func (db *DB) SQL() *sql.DB { return db.sql }

// Tx runs fn in one IMMEDIATE transaction and commits it, unless the process's fence
// ([SetFence]) refuses, which rolls it back and returns the fence's error. When the transaction loses a race for
// the write lock (SQLITE_BUSY or SQLITE_LOCKED) it is rolled back and fn runs again from the
// start, so fn MUST NOT have effects outside the transaction that a retry would repeat.
func (db *DB) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		err = db.tryTx(ctx, fn)
		if err == nil || !IsBusy(err) {
			return err
		}
		// Full jitter keeps several processes from retrying in lock step.
		backoff := time.Duration(rand.Int64N(int64(5*time.Millisecond) << min(attempt, 6)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
	return fmt.Errorf("database %s stayed locked after %d attempts: %w", db.path, maxTxAttempts, err)
}

func (db *DB) tryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	// The fence is asked last, as close to COMMIT as it can be: a leader that lost its lease
	// while fn ran must not commit what fn wrote (fence.go).
	if err := CheckFence(); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// IsBusy reports whether err is SQLite saying another connection holds a lock.
func IsBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return err != nil && strings.Contains(err.Error(), "database is locked")
}

// IsUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY constraint failure.
func IsUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

func (db *DB) migrate(ctx context.Context, migrations []Migration) error {
	// The common case, a schema already current, is read without the write lock (which a
	// transaction takes up front, and which every other process's writer holds in turn):
	// one statement instead of BEGIN IMMEDIATE, a read and a COMMIT. user_version only
	// grows, so a database found current stays current.
	var version int
	if err := db.sql.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("migrate %s: %w", db.path, err)
	}
	if version == len(migrations) {
		return nil
	}
	for {
		var applied bool
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			applied = false
			var version int
			if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
				return err
			}
			if version > len(migrations) {
				return fmt.Errorf("database %s has schema version %d, newer than this agora (%d): upgrade agora", db.path, version, len(migrations))
			}
			if version == len(migrations) {
				return nil
			}
			m := migrations[version]
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %d (%s): %w", version+1, m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", db.path, err)
		}
		if !applied {
			return nil
		}
	}
}
