package retention

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/store"
)

// runBatch is how many runs one orch.db transaction purges: a run of 10,000 tasks is a few
// megabytes of rows, so batches stay small enough not to hold the write lock the engine
// needs for long.
const runBatch = 32

// testOnlyAfterRunRecord, when set (by a test), runs inside a batch's transaction after its
// retention.run_purged entries are appended and before its rows are deleted: a crash there
// must leave both, never one.
var testOnlyAfterRunRecord func()

// runTables are the tables holding a run's rows, children first (foreign keys are on).
var runTables = []string{"attempts", "tasks", "run_extensions", "run_plans"}

// PurgeRuns removes items' rows from orch.db (db), each batch in one transaction that first
// appends one retention.run_purged entry per run to orch.db's log (log), so the record and
// the deletion commit together. Inside that transaction each run is read again: one that is
// gone (another sweep purged it), no longer sealed and ended as planned, that a schedule now
// names as its last run, or that a waiting row log record names, is left alone and counted
// in Result.RunsSkipped.
func PurgeRuns(ctx context.Context, db *store.DB, log *audit.Log, items []RunItem, age time.Duration, now time.Time, actor, role string, res *Result) error {
	for len(items) > 0 {
		n := min(runBatch, len(items))
		chunk := items[:n]
		items = items[n:]
		var purged, skipped, tasks, attempts int
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			purged, skipped, tasks, attempts = 0, 0, 0, 0
			st, err := prepareRunStmts(ctx, tx)
			if err != nil {
				return err
			}
			defer st.close()
			// Read again under the write lock: a run a waiting row log record names has rows
			// this purge would not count (the plan left it out; this holds if a record
			// appeared since).
			u, err := readUnfolded(ctx, tx)
			if err != nil {
				return err
			}
			var left []RunItem
			for _, it := range chunk {
				ok, err := st.stillPurgeable(ctx, it)
				if err != nil {
					return err
				}
				if !ok || u.holds(it.Run) {
					skipped++
					continue
				}
				left = append(left, it)
			}
			if len(left) == 0 {
				return nil
			}
			entries := make([]audit.Entry, 0, len(left))
			for _, it := range left {
				entries = append(entries, runPurgeEntry(it, age, now, actor, role))
			}
			if _, err := log.AppendAll(ctx, tx, entries); err != nil {
				return fmt.Errorf("record run purges: %w", err)
			}
			if testOnlyAfterRunRecord != nil {
				testOnlyAfterRunRecord()
			}
			for _, it := range left {
				if err := st.deleteRun(ctx, it.Run); err != nil {
					return err
				}
				purged++
				tasks += it.Tasks
				attempts += it.Attempts
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("purge runs: %w", err)
		}
		res.Runs += purged
		res.RunsSkipped += skipped
		res.RunTasks += tasks
		res.RunAttempts += attempts
	}
	return nil
}

// runStmts are a purge transaction's statements, prepared once per batch: compiling six
// statements for every run was most of a purge's time.
type runStmts struct {
	read *sql.Stmt
	del  []*sql.Stmt // runTables' deletes, then the run's
}

func prepareRunStmts(ctx context.Context, tx *sql.Tx) (*runStmts, error) {
	st := &runStmts{}
	var err error
	st.read, err = tx.PrepareContext(ctx, `SELECT ended_at, sealed_at, EXISTS (SELECT 1 FROM schedules s WHERE s.last_run = runs.id)
		FROM runs WHERE id = ?`)
	if err != nil {
		return nil, err
	}
	for _, t := range runTables {
		// t is one of runTables' constants, never input.
		d, err := tx.PrepareContext(ctx, `DELETE FROM `+t+` WHERE run_id = ?`)
		if err != nil {
			st.close()
			return nil, err
		}
		st.del = append(st.del, d)
	}
	d, err := tx.PrepareContext(ctx, `DELETE FROM runs WHERE id = ?`)
	if err != nil {
		st.close()
		return nil, err
	}
	st.del = append(st.del, d)
	return st, nil
}

func (st *runStmts) close() {
	if st.read != nil {
		st.read.Close()
	}
	for _, d := range st.del {
		d.Close()
	}
}

// stillPurgeable reads run it again inside the purge's transaction (which holds orch.db's
// write lock): sealed, ended when planned, and named by no schedule's last run.
func (st *runStmts) stillPurgeable(ctx context.Context, it RunItem) (bool, error) {
	var ended, sealed string
	var scheduled bool
	err := st.read.QueryRowContext(ctx, it.Run).Scan(&ended, &sealed, &scheduled)
	if err == sql.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read run %s: %w", it.Run, err)
	}
	at, err := time.Parse(time.RFC3339Nano, ended)
	return err == nil && at.Equal(it.EndedAt) && sealed != "" && !scheduled, nil
}

// deleteRun deletes every row of run id, children first.
func (st *runStmts) deleteRun(ctx context.Context, id string) error {
	for i, d := range st.del {
		if _, err := d.ExecContext(ctx, id); err != nil {
			what := "run"
			if i < len(runTables) {
				what = runTables[i]
			}
			return fmt.Errorf("purge run %s: delete its %s: %w", id, what, err)
		}
	}
	return nil
}

// runPurgeEntry is the retention.run_purged entry of run it: what it was (plan name and
// digest, state, end, size) and why, never the plan's body.
func runPurgeEntry(it RunItem, age time.Duration, now time.Time, actor, role string) audit.Entry {
	why := fmt.Sprintf("retention.runs %dd: ended %s, %dd before %s", int64(age/(24*time.Hour)),
		it.EndedAt.Format(time.RFC3339), int64(now.Sub(it.EndedAt)/(24*time.Hour)), now.Format(time.RFC3339))
	return audit.Entry{Actor: actor, Kind: entry.RetentionRunPurged, Subject: entry.Run(it.Run),
		Details: map[string]any{entry.KeyRole: role, entry.KeyName: it.Name, entry.KeyState: it.State, entry.KeyPlanDigest: it.Digest,
			entry.KeyEndedAt: it.EndedAt.Format(time.RFC3339Nano), entry.KeyTasks: int64(it.Tasks), "attempts": int64(it.Attempts), entry.KeyWhy: why}}
}
