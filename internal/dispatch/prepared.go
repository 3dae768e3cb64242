package dispatch

import (
	"context"
	"database/sql"
	"sync"
)

// stmts holds prepared statements by their text, for the record reads every dispatch makes
// four times or more (accept, supervise, started, finish: the record, its events and its
// approvals). SQLite parses a statement's text on every ad hoc query, and the record's
// 45-column SELECT cost ~150 us to parse against ~20 us to run prepared. A
// statement prepared once is reused on every connection it has been prepared on,
// transactions' included (database/sql keeps one per connection).
type stmts struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmts(db *sql.DB) *stmts { return &stmts{db: db, m: map[string]*sql.Stmt{}} }

// get returns query prepared, preparing it on first use; nil when it cannot be (the caller
// then runs it ad hoc, which reports the same error).
func (c *stmts) get(ctx context.Context, query string) *sql.Stmt {
	if c == nil || c.db == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	st, err := c.db.PrepareContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil
	}
	c.m[query] = st
	return st
}

// prepared is a queryer that runs its queries through c's statements: on the database, or
// within the transaction q is.
type prepared struct {
	q queryer
	c *stmts
}

// on returns the statement for query bound to p's transaction, or nil to run it ad hoc.
func (p prepared) on(ctx context.Context, query string) *sql.Stmt {
	st := p.c.get(ctx, query)
	if st == nil {
		return nil
	}
	switch q := p.q.(type) {
	case *sql.DB:
		if q != p.c.db {
			return nil
		}
		return st
	case *sql.Tx:
		// Closed with the transaction; prepared on its connection only if not already.
		return q.StmtContext(ctx, st)
	}
	return nil
}

func (p prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.on(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.q.QueryRowContext(ctx, query, args...)
}

func (p prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.on(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.q.QueryContext(ctx, query, args...)
}
