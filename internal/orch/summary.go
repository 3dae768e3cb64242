package orch

import (
	"context"
	"database/sql"
	"errors"

	"github.com/agora-dev/agora/internal/orch/api"
)

// Summary returns a run (by id or name) as [Engine.Status] does, without its tasks: the
// run's row, its counts and total, its concurrency, budget and usage. For a run the engine
// holds it reads the run's few states (run_counts) and never its tasks, so answering a
// submission of 100,000 tasks costs what answering one of ten does. A run the engine no
// longer holds is read as Status reads it, a task at a time, none kept (its next step too).
func (e *Engine) Summary(ctx context.Context, ref string) (api.Run, error) {
	var out api.Run
	err := readTx(ctx, e.db.SQL(), func(q querier, ov *overlay) error {
		r, err := runByRef(ctx, q, ref)
		if err != nil {
			return err
		}
		cached, ok := e.specs.Load(r.ID)
		if !ok {
			out, err = status(ctx, q, ov, r.ID, func(string) (any, bool) { return nil, false }, nil)
			out.NameRuns = r.NameRuns
			return err
		}
		rs := cached.(runSpecs)
		if r.Counts, r.Total, err = runCounts(ctx, q, ov, r.ID); err != nil {
			return err
		}
		u, err := runUsageIn(ctx, q, ov, r.ID)
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
		return api.Run{}, runNotFound(ctx, e.db.SQL(), ref)
	}
	return out, err
}
