package retention

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// orch.db's engine writes its task and attempt rows as a log (orch's rowlog.go, row_log),
// folded into the tasks and attempts tables when it is idle. This package cannot decode the
// records; each names the runs whose rows it changes in its runs column (a JSON array of run
// ids, orch's commit.go logRuns), written in the record's own insert. While a record waits,
// exactly those runs are kept (a purge would not count their rows in the log, and the fold
// would then drop them) and so are their attempts' dispatches (an attempt only in
// the log is not in the attempts table the live-run check reads). Any other run goes as
// policy says, so a serve that is never idle still purges.

// unfolded is what the records of orch.db's row log name.
type unfolded struct {
	records int
	// all: a record's runs are unknown (written before the runs column, or a column that
	// does not parse), so every run is held, as if each record named them all.
	all  bool
	runs map[string]bool
}

// holds says whether a waiting record may change run's rows.
func (u *unfolded) holds(run string) bool {
	return u.all || u.runs[run]
}

// querier is what readUnfolded reads through: a pool, a connection or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readUnfolded reads the runs orch.db's row log names, through q. An orch.db from before the
// row log has none; one from before its runs column holds every run while any record waits.
func readUnfolded(ctx context.Context, q querier) (*unfolded, error) {
	u := &unfolded{runs: map[string]bool{}}
	var tables, columns int
	if err := q.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'row_log'),
		(SELECT count(*) FROM pragma_table_info('row_log') WHERE name = 'runs')`).Scan(&tables, &columns); err != nil {
		return nil, fmt.Errorf("read orch.db's row log: %w", err)
	}
	if tables == 0 {
		return u, nil
	}
	if columns == 0 {
		if err := q.QueryRowContext(ctx, `SELECT count(*) FROM row_log`).Scan(&u.records); err != nil {
			return nil, fmt.Errorf("read orch.db's row log: %w", err)
		}
		u.all = u.records > 0
		return u, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT runs FROM row_log`)
	if err != nil {
		return nil, fmt.Errorf("read orch.db's row log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var col string
		if err := rows.Scan(&col); err != nil {
			return nil, fmt.Errorf("read orch.db's row log: %w", err)
		}
		u.records++
		u.add(col)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read orch.db's row log: %w", err)
	}
	return u, nil
}

// add takes one record's runs column. Fail closed: a column that is empty, not a JSON array
// of strings, or names no run (every record the engine writes changes some run's rows) makes
// every run held.
func (u *unfolded) add(col string) {
	var names []string
	if err := json.Unmarshal([]byte(col), &names); err != nil || len(names) == 0 {
		u.all = true
		return
	}
	for _, n := range names {
		u.runs[n] = true
	}
}
