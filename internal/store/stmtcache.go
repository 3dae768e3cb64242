package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strings"
)

// maxCachedStmts bounds each connection's statement cache: past it the cache is emptied and
// fills again with what runs next, so statements whose text varies cannot hold memory.
const maxCachedStmts = 256

// maxCachedParams: a statement with more parameters than this runs ad hoc, never cached. Its
// text is almost always built for its arguments (an IN list of ids, the audit proof's node
// reads), so it rarely runs twice, and a compiled statement of hundreds of parameters is tens
// of kilobytes: 256 of them would hold megabytes a connection.
const maxCachedParams = 64

// connector opens the SQLite driver's connections with a statement cache each.
//
// SQLite parses a statement's text on every ad hoc Exec or Query (modernc's driver prepares,
// runs and finalizes each one); an agora process runs the same few dozen statements over and
// over, and their parsing was about a tenth of a dispatch's CPU in the resident. A cached
// statement is the one SQLite would compile from the same text: it is reset and its bindings
// cleared after every use, and SQLite compiles it again by itself when the schema changes.
type connector struct {
	d   driver.Driver
	dsn string
	// begin starts a read-write transaction: "BEGIN IMMEDIATE" for the DSN's _txlock=immediate.
	begin string
}

// openCached is sql.Open("sqlite", dsn) with each connection's statements cached, BEGIN,
// COMMIT and ROLLBACK among them. begin is the statement that starts a read-write
// transaction, as the DSN's _txlock makes the driver's own.
func openCached(dsn, begin string) (*sql.DB, error) {
	// sql.Open connects to nothing; it only finds the registered driver.
	probe, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	d := probe.Driver()
	probe.Close()
	return sql.OpenDB(connector{d: d, dsn: dsn, begin: begin}), nil
}

func (c connector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	ex, eok := conn.(driver.ExecerContext)
	q, qok := conn.(driver.QueryerContext)
	if !eok || !qok {
		conn.Close()
		return nil, errors.New("the sqlite driver's connection runs no ad hoc statements (ExecerContext, QueryerContext)")
	}
	return &cachingConn{Conn: conn, exec: ex, query: q, stmts: map[string]*cachedStmt{}, begin: c.begin}, nil
}

func (c connector) Driver() driver.Driver { return c.d }

// cachingConn is a driver connection whose ad hoc Exec and Query run through prepared
// statements kept by their text. database/sql uses a connection from one goroutine at a
// time, but a query's rows may still be open when the same text runs again (a query inside
// a loop over another's rows): a statement in use is then bypassed, never shared.
type cachingConn struct {
	driver.Conn
	exec  driver.ExecerContext
	query driver.QueryerContext
	stmts map[string]*cachedStmt
	begin string
	// inTx: a BEGIN ran and no COMMIT or ROLLBACK succeeded after it, so the connection may be
	// inside a transaction. Such a connection is never handed on (IsValid): its next user's
	// BEGIN would fail "cannot start a transaction within a transaction", and a transaction
	// left open holds the write lock or a snapshot the WAL cannot be checkpointed past. It is
	// set before the BEGIN runs because a BEGIN can take effect and still report an error:
	// the driver reports a context that ends during a statement as the statement's error,
	// even when the statement completed.
	inTx bool
}

type cachedStmt struct {
	st   driver.Stmt
	busy bool // its rows are open
}

// stmt returns query's statement, prepared on first use, or nil to run query ad hoc: when
// the statement is busy, or does not prepare (the ad hoc run reports the same error).
func (c *cachingConn) stmt(ctx context.Context, query string) *cachedStmt {
	if cs, ok := c.stmts[query]; ok {
		if cs.busy {
			return nil
		}
		return cs
	}
	if strings.Count(query, "?") > maxCachedParams {
		return nil
	}
	if len(c.stmts) >= maxCachedStmts {
		c.evict()
	}
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	_, execs := st.(driver.StmtExecContext)
	_, queries := st.(driver.StmtQueryContext)
	if !execs || !queries {
		st.Close()
		return nil
	}
	cs := &cachedStmt{st: st}
	c.stmts[query] = cs
	return cs
}

// evict closes every cached statement not in use.
func (c *cachingConn) evict() {
	for q, cs := range c.stmts {
		if !cs.busy {
			cs.st.Close()
			delete(c.stmts, q)
		}
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	effect := txEffectOf(query)
	if effect == txBegins {
		c.inTx = true
	}
	var r driver.Result
	var err error
	if cs := c.stmt(ctx, query); cs == nil {
		r, err = c.exec.ExecContext(ctx, query, args)
	} else {
		r, err = cs.st.(driver.StmtExecContext).ExecContext(ctx, args)
	}
	if effect == txEnds && err == nil {
		c.inTx = false
	}
	return r, err
}

type txEffect int

const (
	txNone txEffect = iota
	txBegins
	txEnds
)

// txEffectOf says whether query begins or ends a transaction, by its first word: BEGIN or
// SAVEPOINT begins one (a savepoint outside a transaction opens it); COMMIT, END and a
// ROLLBACK that is not ROLLBACK TO end it. RELEASE is neither: only SQLite knows whether it
// released the outermost savepoint, so a connection that used one is not handed on.
func txEffectOf(query string) txEffect {
	q := strings.TrimLeft(query, " \t\r\n")
	word := q
	if i := strings.IndexAny(q, " \t\r\n;"); i >= 0 {
		word = q[:i]
	}
	switch {
	case strings.EqualFold(word, "BEGIN"), strings.EqualFold(word, "SAVEPOINT"):
		return txBegins
	case strings.EqualFold(word, "COMMIT"), strings.EqualFold(word, "END"):
		return txEnds
	case strings.EqualFold(word, "ROLLBACK"):
		rest := strings.Fields(q[len(word):])
		if len(rest) > 0 && strings.EqualFold(rest[0], "TRANSACTION") {
			rest = rest[1:]
		}
		if len(rest) > 0 && strings.EqualFold(strings.TrimRight(rest[0], ";"), "TO") {
			return txNone
		}
		return txEnds
	}
	return txNone
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs := c.stmt(ctx, query)
	if cs == nil {
		return c.query.QueryContext(ctx, query, args)
	}
	r, err := cs.st.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	cs.busy = true
	return &cachedRows{Rows: r, cs: cs}, nil
}

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

// BeginTx starts a transaction as the driver does (its BEGIN, then COMMIT or ROLLBACK), each
// through the cache: the driver parses all three again for every transaction.
func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) {
		return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	}
	begin := "BEGIN"
	if !opts.ReadOnly {
		begin = c.begin
	}
	if _, err := c.ExecContext(ctx, begin, nil); err != nil {
		return nil, err
	}
	return cachedTx{c}, nil
}

type cachedTx struct{ c *cachingConn }

// Commit commits; when COMMIT fails (SQLITE_BUSY) the transaction may still be open: it is
// rolled back, as the driver's own Commit does, and when that fails too the connection is
// not handed on (inTx stays set).
func (t cachedTx) Commit() error {
	_, err := t.c.ExecContext(context.Background(), "COMMIT", nil)
	if err != nil {
		_, _ = t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	}
	return err
}

func (t cachedTx) Rollback() error {
	_, err := t.c.ExecContext(context.Background(), "ROLLBACK", nil)
	return err
}

func (c *cachingConn) ResetSession(ctx context.Context) error {
	if c.inTx {
		return driver.ErrBadConn
	}
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid is false for a connection that may be inside a transaction: database/sql then
// closes it instead of putting it back in the pool.
func (c *cachingConn) IsValid() bool {
	if c.inTx {
		return false
	}
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *cachingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	for q, cs := range c.stmts {
		cs.st.Close()
		delete(c.stmts, q)
	}
	return c.Conn.Close()
}

// cachedRows are a cached statement's rows: closing them resets the statement (the driver's
// doing) and frees it for the next run.
type cachedRows struct {
	driver.Rows
	cs *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.cs.busy = false
	return err
}

// The column type methods database/sql's ColumnTypes asks for, passed through.

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *cachedRows) ColumnTypeNullable(i int) (bool, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
