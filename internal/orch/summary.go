package orch

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agora-dev/agora/internal/orch/api"
)

// Summary returns run id as [Engine.Status] does, without its tasks: the run's row, its
// counts and total, its concurrency, budget and usage. For a run the engine holds it reads
// the run's few states (run_counts) and never its tasks, so answering a submission of
// 100,000 tasks costs what answering one of ten does; Status builds every task's view, tens
// of MB at that size, only to have the submission's answer leave them out. A run the engine
// no longer holds is read by Status, its tasks dropped.
func (e *Engine) Summary(ctx context.Context, id string) (api.Run, error) {
	cached, ok := e.specs.Load(id)
	if !ok {
		r, err := e.Status(ctx, id)
		r.Tasks = nil
		return r, err
	}
	rs := cached.(runSpecs)
	var out api.Run
	err := readTx(ctx, e.db.SQL(), func(q querier, ov *overlay) error {
		r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
		if err != nil {
			return err
		}
		if r.Counts, r.Total, err = runCounts(ctx, q, ov, id); err != nil {
			return err
		}
		u, err := runUsageIn(ctx, q, ov, id)
		if err != nil {
			return err
		}
		if !u.IsZero() {
			r.Usage = &u
		}
		r.Concurrency, r.Queue = rs.concurrency, rs.queue
		if !rs.budget.IsZero() {
			b := rs.budget
			r.Budget = &b
		}
		out = r
		return nil
	})
	if errors.Is(err, sql.ErrNoRows) {
		return api.Run{}, runNotFound(ctx, e.db.SQL(), id)
	}
	return out, err
}
