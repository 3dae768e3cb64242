package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// cachedConn opens a one-connection pool on a new database and returns it with the driver
// connection behind it, whose cache the tests read.
func cachedConn(t *testing.T) (*sql.DB, *cachingConn) {
	t.Helper()
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "c.db"), []Migration{
		{Name: "t", SQL: `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE); CREATE TABLE u (id INTEGER PRIMARY KEY);`},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.sql.SetMaxOpenConns(1)
	var cc *cachingConn
	conn, err := db.sql.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Raw(func(dc any) error { cc = dc.(*cachingConn); return nil }); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	return db.sql, cc
}

func TestStmtCache_OneStatementATextReused(t *testing.T) {
	db, cc := cachedConn(t)
	for i := range 50 {
		if _, err := db.Exec(`INSERT INTO t(v) VALUES (?)`, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM t WHERE id <= ?`, i+1).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("count after %d inserts = %d, %v", i+1, n, err)
		}
	}
	ins, sel := cc.stmts[`INSERT INTO t(v) VALUES (?)`], cc.stmts[`SELECT count(*) FROM t WHERE id <= ?`]
	if ins == nil || sel == nil {
		t.Fatalf("the insert and the select are not cached: %v", cc.stmts)
	}
	if sel.busy {
		t.Error("the select's statement is still marked in use after its row was scanned")
	}
}

// A query run again while its own rows are open (a loop over rows that queries the same
// text) gets a statement of its own: sharing one would rewind the outer rows.
func TestStmtCache_SameTextWhileRowsOpen(t *testing.T) {
	db, _ := cachedConn(t)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, v := range []string{"a", "b", "c"} {
		if _, err := tx.Exec(`INSERT INTO t(v) VALUES (?)`, v); err != nil {
			t.Fatal(err)
		}
	}
	const q = `SELECT v FROM t WHERE v >= ? ORDER BY v`
	rows, err := tx.Query(q, "a")
	if err != nil {
		t.Fatal(err)
	}
	var outer []string
	var inner int
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, v)
		in, err := tx.Query(q, v)
		if err != nil {
			t.Fatal(err)
		}
		for in.Next() {
			inner++
		}
		if err := in.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(outer) != "[a b c]" || inner != 3+2+1 {
		t.Errorf("outer rows %v, inner rows %d; want [a b c] and 6", outer, inner)
	}
}

// SQLite compiles a cached statement again when the schema changes under it.
func TestStmtCache_SchemaChangeSeen(t *testing.T) {
	db, _ := cachedConn(t)
	if _, err := db.Exec(`INSERT INTO u(id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	cols := func() []string {
		rows, err := db.Query(`SELECT * FROM u`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		c, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := cols(); len(c) != 1 {
		t.Fatalf("columns %v", c)
	}
	if _, err := db.Exec(`ALTER TABLE u ADD COLUMN w TEXT`); err != nil {
		t.Fatal(err)
	}
	if c := cols(); len(c) != 2 || c[1] != "w" {
		t.Errorf("after ALTER TABLE the cached SELECT * has columns %v, want [id w]", c)
	}
}

// A statement that failed (a constraint) runs again, and a statement that was read from
// leaves no read transaction open: another connection can checkpoint the whole WAL.
func TestStmtCache_ErrorsAndNoReadLeftOpen(t *testing.T) {
	db, cc := cachedConn(t)
	const ins = `INSERT INTO t(v) VALUES (?)`
	if _, err := db.Exec(ins, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ins, "x"); err == nil || !IsUniqueViolation(err) {
		t.Fatalf("a duplicate through the cached insert: %v, want a unique violation", err)
	}
	if _, err := db.Exec(ins, "y"); err != nil {
		t.Fatalf("the cached insert after its failure: %v", err)
	}
	var v string
	if err := db.QueryRow(`SELECT v FROM t WHERE v = ?`, "y").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if cc.stmts[ins] == nil || cc.stmts[`SELECT v FROM t WHERE v = ?`] == nil {
		t.Errorf("the insert or the select is not cached: %v", cc.stmts)
	}
	other, err := sql.Open("sqlite", "file:"+filepath.Join(filepath.Dir(pathOf(t, db)), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var busy, logged, done int
	if err := other.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logged, &done); err != nil {
		t.Fatal(err)
	}
	if busy != 0 {
		t.Errorf("wal_checkpoint(TRUNCATE) was blocked (busy=%d): a cached statement holds a read open", busy)
	}
}

func pathOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	var seq int
	var name, file string
	if err := db.QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &file); err != nil {
		t.Fatal(err)
	}
	return file
}

// Past maxCachedStmts the cache empties, except a statement whose rows are open.
func TestStmtCache_Bounded(t *testing.T) {
	db, cc := cachedConn(t)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	open, err := conn.QueryContext(t.Context(), `SELECT id FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxCachedStmts + 10 {
		var n int
		if err := conn.QueryRowContext(t.Context(), fmt.Sprintf(`SELECT %d`, i)).Scan(&n); err != nil || n != i {
			t.Fatalf("SELECT %d = %d, %v", i, n, err)
		}
	}
	if len(cc.stmts) > maxCachedStmts {
		t.Errorf("%d cached statements, bound %d", len(cc.stmts), maxCachedStmts)
	}
	if cc.stmts[`SELECT id FROM t`] == nil {
		t.Error("the statement whose rows are open was evicted")
	}
	// A statement of many parameters (an IN list built for its arguments) runs, uncached.
	in := `SELECT count(*) FROM t WHERE id IN (` + strings.TrimSuffix(strings.Repeat("?,", maxCachedParams+1), ",") + `)`
	args := make([]any, maxCachedParams+1)
	for i := range args {
		args[i] = i
	}
	var n int
	if err := conn.QueryRowContext(t.Context(), in, args...).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the IN list: %d, %v", n, err)
	}
	if cc.stmts[in] != nil {
		t.Errorf("a statement of %d parameters is cached", maxCachedParams+1)
	}
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
}

// A transaction from the cache takes the write lock when it begins (BEGIN IMMEDIATE), as the
// driver's own did with _txlock=immediate: a second writer is refused before either writes.
func TestStmtCache_BeginIsImmediate(t *testing.T) {
	db, _ := cachedConn(t)
	path := pathOf(t, db) // before the transaction holds the pool's one connection
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.Exec(`BEGIN IMMEDIATE`)
	if !IsBusy(err) {
		t.Errorf("BEGIN IMMEDIATE beside an open transaction: %v, want SQLITE_BUSY (the first did not take the write lock)", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(`BEGIN IMMEDIATE; ROLLBACK`); err != nil {
		t.Errorf("after the rollback the write lock is still held: %v", err)
	}
	tx, err = db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO t(v) VALUES ('c')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := other.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the committed row seen by another connection: %d, %v", n, err)
	}
}

// A request's context that ends while its transaction begins must never leave the pool a
// connection inside a transaction: the next BEGIN on it would fail "cannot start a
// transaction within a transaction", for every caller, until the process ends.
func TestStmtCache_BeginCanceledLeavesNoTransactionOpen(t *testing.T) {
	db, _ := cachedConn(t)
	var begun, refused int
	for i := range 400 {
		ctx, cancel := context.WithCancel(t.Context())
		go cancel()
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: i%2 == 0})
		if err == nil {
			begun++
			_ = tx.Rollback()
		} else {
			refused++
		}
		cancel()
		if _, err := db.Exec(`INSERT INTO u(id) VALUES (?)`, i); err != nil {
			t.Fatalf("after begin %d (%d begun, %d refused by their context), a write on the pool's one connection: %v", i, begun, refused, err)
		}
	}
	t.Logf("%d begun, %d refused by their context", begun, refused)
}

// A connection handed back inside a transaction (a reader's BEGIN whose ROLLBACK never ran,
// or failed) is closed, not pooled: the next user gets a fresh connection and its BEGIN works.
func TestStmtCache_ConnectionLeftInTransactionNotPooled(t *testing.T) {
	db, leaked := cachedConn(t)
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `BEGIN DEFERRED`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `SELECT count(*) FROM t`); err != nil {
		t.Fatal(err)
	}
	conn.Close() // no ROLLBACK: the transaction is still open
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatalf("BEGIN after a connection came back inside a transaction: %v", err)
	}
	if _, err := tx.Exec(`INSERT INTO t(v) VALUES ('after')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	conn, err = db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(dc any) error {
		if dc.(*cachingConn) == leaked {
			t.Error("the connection left inside a transaction is still in the pool")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The same through the driver's own words: COMMIT and ROLLBACK that succeed hand the
	// connection on; a ROLLBACK TO a savepoint does not end the transaction.
	for _, c := range []struct {
		stmts []string
		valid bool
	}{
		{[]string{`BEGIN`, `COMMIT`}, true},
		{[]string{`begin immediate`, `end`}, true},
		{[]string{`BEGIN`, `ROLLBACK TRANSACTION`}, true},
		{[]string{`SAVEPOINT a`, `ROLLBACK TO a`}, false},
		{[]string{`SAVEPOINT a`, `ROLLBACK TRANSACTION TO SAVEPOINT a`}, false},
		{[]string{`ROLLBACK`}, true}, // fails (no transaction is active) and changes nothing
	} {
		if err := conn.Raw(func(dc any) error {
			cc := dc.(*cachingConn)
			for _, s := range c.stmts {
				_, _ = cc.ExecContext(t.Context(), s, nil)
			}
			if got := cc.IsValid(); got != c.valid {
				t.Errorf("after %q the connection's IsValid is %v, want %v", c.stmts, got, c.valid)
			}
			_, _ = cc.ExecContext(t.Context(), `ROLLBACK`, nil)
			cc.inTx = false
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A COMMIT refused with the transaction still open (a deferred foreign key still violated)
// is rolled back, so the connection goes back to the pool clean and the next BEGIN works.
func TestStmtCache_FailedCommitRolledBack(t *testing.T) {
	db, cc := cachedConn(t)
	if _, err := db.Exec(`CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO c(p) VALUES (7)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Fatalf("COMMIT with a deferred foreign key violated: %v, want its refusal", err)
	}
	if cc.inTx {
		t.Error("after the refused COMMIT's ROLLBACK the connection is still marked inside a transaction")
	}
	if _, err := db.Exec(`INSERT INTO t(v) VALUES ('next')`); err != nil {
		t.Fatalf("a write after the refused COMMIT: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM c`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the refused transaction's row: %d rows, %v; want it rolled back", n, err)
	}
}
