package orch

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agora-dev/agora/internal/audit"
)

// The statements every commit runs, prepared once on the pool ([Engine] prepares them in
// [Open]) and bound to each transaction with [sql.Tx.StmtContext], which reuses the
// connection's compiled statement: compiling them again in every commit cost more than
// running them for a small batch.
const (
	sqlUpdateRun  = `UPDATE runs SET state = ?, cancel_requested = ?, ended_at = ?, sealed_at = ? WHERE id = ?`
	sqlUpdateTask = `UPDATE tasks SET state = ?, attempts = ?, failures = ?, dispatch_id = ?, ready_seq = ?,
		retry_at = ?, reason = ?, detail = ?, question = ?, answer = ?, cancel = ?, review = ? WHERE run_id = ? AND idx = ?`
	sqlInsertTask = `INSERT INTO tasks(run_id, idx, id, state, attempts, failures, dispatch_id, ready_seq, retry_at, reason, detail, question, answer, cancel)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertAttempt = `INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, parent_id, inputs, fired_at)
		VALUES (?, ?, ?, ?, 'live', ?, ?, ?)`
	sqlEndAttempt = `UPDATE attempts SET state = ?, reason = ?, ended_at = ?, usage = ?, verdict = ? WHERE dispatch_id = ?`
	// An attempt fired and ended in the records one fold applies: its row as it stands.
	sqlInsertAttemptWhole = `INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, reason, parent_id, inputs, fired_at, ended_at, usage, verdict)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertLog = `INSERT INTO row_log(record, runs) VALUES (?, ?)`
)

// stmts holds the engine's prepared statements. Owned by the Run goroutine once Run starts.
type stmts struct {
	updateRun, updateTask, insertTask, insertAttempt, endAttempt, insertAttemptWhole, insertLog *sql.Stmt
	// The one-row plain forms (multirow.go).
	updateTaskPlain, insertTaskPlain, insertAttemptWholePlain *sql.Stmt

	// updateTask, insertTask, insertAttempt and endAttempt with their multi-row forms
	// (multirow.go), and the plain forms'.
	updateTasks, insertTasks, insertAttempts, endAttempts, insertAttemptsWhole chunked
	updateTasksPlain, insertTasksPlain, insertAttemptsWholePlain               chunked

	audit *audit.Statements // the audit log's, for AppendAllWith
}

// prepare compiles the commit statements on db.
func (s *stmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&s.updateRun, sqlUpdateRun}, {&s.updateTask, sqlUpdateTask}, {&s.insertTask, sqlInsertTask},
		{&s.insertAttempt, sqlInsertAttempt}, {&s.endAttempt, sqlEndAttempt}, {&s.insertAttemptWhole, sqlInsertAttemptWhole},
		{&s.insertLog, sqlInsertLog},
		{&s.updateTaskPlain, chunkSQL(updateTaskPlainChunk[0], updateTaskPlainChunk[1], updateTaskPlainChunk[2], 1)},
		{&s.insertTaskPlain, chunkSQL(insertTaskPlainChunk[0], insertTaskPlainChunk[1], insertTaskPlainChunk[2], 1)},
		{&s.insertAttemptWholePlain, chunkSQL(insertAttemptWholePlainChunk[0], insertAttemptWholePlainChunk[1], insertAttemptWholePlainChunk[2], 1)},
	} {
		st, err := db.PrepareContext(ctx, p.q)
		if err != nil {
			s.close()
			return err
		}
		*p.dst = st
	}
	for _, c := range []struct {
		dst *chunked
		one *sql.Stmt
		q   [3]string
		key []int
	}{{&s.updateTasks, s.updateTask, updateTaskChunk, updateTaskKey}, {&s.insertTasks, s.insertTask, insertTaskChunk, nil},
		{&s.insertAttempts, s.insertAttempt, insertAttemptChunk, nil}, {&s.endAttempts, s.endAttempt, endAttemptChunk, endAttemptKey},
		{&s.insertAttemptsWhole, s.insertAttemptWhole, insertAttemptWholeChunk, nil},
		{&s.updateTasksPlain, s.updateTaskPlain, updateTaskPlainChunk, updateTaskPlainKey},
		{&s.insertTasksPlain, s.insertTaskPlain, insertTaskPlainChunk, nil},
		{&s.insertAttemptsWholePlain, s.insertAttemptWholePlain, insertAttemptWholePlainChunk, nil}} {
		ch, err := prepareChunked(ctx, db, c.one, c.q, c.key)
		if err != nil {
			s.close()
			return err
		}
		*c.dst = ch
	}
	st, err := audit.PrepareStatements(ctx, db)
	if err != nil {
		s.close()
		return err
	}
	s.audit = st
	return nil
}

// close releases the statements.
func (s *stmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.updateRun, s.updateTask, s.insertTask, s.insertAttempt, s.endAttempt, s.insertAttemptWhole, s.insertLog,
		s.updateTaskPlain, s.insertTaskPlain, s.insertAttemptWholePlain} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	for _, c := range []*chunked{&s.updateTasks, &s.insertTasks, &s.insertAttempts, &s.endAttempts, &s.insertAttemptsWhole,
		&s.updateTasksPlain, &s.insertTasksPlain, &s.insertAttemptsWholePlain} {
		errs = append(errs, c.close())
	}
	if s.audit != nil {
		s.audit.Close()
	}
	*s = stmts{}
	return errors.Join(errs...)
}
