package retention_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/retention"
)

// TestRedTeam34_OddRunIDs: runs whose ids the engine never writes but orch.db may hold (text
// that is not UTF-8, control characters, dots, SQL LIKE's wildcards; a plan name that is not
// UTF-8) never stop a sweep: the runs of sound ids in the same batch are purged, each odd one
// is purged exactly (its rows, no other run's) or left whole, one the log cannot name (not
// UTF-8) is left whole, and the log exported after verifies. Before, a run id or name that
// was not UTF-8 failed the purge's entry, its batch and every later batch, at every sweep.
func TestRedTeam34_OddRunIDs(t *testing.T) {
	h := newHome(t)
	o := h.orchDB(t)
	odd := []string{"bad\xff\xfe", "nl\nrun", "nul\x00run", "..", "%", "_", "r-a%", " r-a"}
	o.add(t, orun{id: "r-a", ended: ago(200), sealed: true, tasks: 2})
	for _, id := range odd {
		o.rawRun(t, id, "odd", ago(250))
	}
	o.rawRun(t, "r-badname", "name\xc3", ago(250))
	o.add(t, orun{id: "r-young", ended: ago(10), sealed: true, tasks: 1})
	ctx := context.Background()
	_, res, err := h.sweeper(runsPolicy).Run(ctx, "ops", retention.RoleOperator, nil)
	if err != nil {
		t.Fatalf("a sweep over odd run ids failed: %v (result %+v)", err, res)
	}
	if n := o.rowsOf(t, "r-a"); n != 0 {
		t.Fatalf("r-a keeps %d rows", n)
	}
	if n := o.rowsOf(t, "r-young"); n == 0 {
		t.Fatal("r-young was purged")
	}
	for _, id := range odd {
		if n := o.rowsOf(t, id); n != 0 && n != 5 {
			t.Errorf("run %q left with %d rows: partly purged", id, n)
		}
	}
	for _, id := range []string{"bad\xff\xfe", "r-badname"} {
		if n := o.rowsOf(t, id); n != 5 {
			t.Errorf("run %q (not UTF-8) left with %d rows, want all 5", id, n)
		}
	}
	verifyOrchLog(t, o)
}

// rawRun writes a sealed run of id with one task and attempt, and no audit entry: an id the
// log cannot take (not UTF-8) is written so, as by a hand or another tool.
func (o *orchHome) rawRun(t *testing.T, id, name, ended string) {
	t.Helper()
	err := o.db.Tx(context.Background(), func(tx *sql.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at) VALUES (?, ?, 'sha256:11', 'succeeded', 'alice', ?, ?, ?)`, []any{id, name, ago(400), ended, ended}},
			{`INSERT INTO run_plans(run_id, plan) VALUES (?, '{}')`, []any{id}},
			{`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id) VALUES (?, 0, 't0', 'succeeded', 1, ?)`, []any{id, id + "-d0"}},
			{`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, ended_at) VALUES (?, ?, 0, 1, 'succeeded', ?, ?)`, []any{id + "-d0", id, ago(400), ended}},
			{`INSERT INTO run_extensions(run_id, seq, cause, task, first, count, data) VALUES (?, 0, 'fan_out', 't0', 1, 0, '{}')`, []any{id}},
		} {
			if _, err := tx.Exec(q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRedTeam34_PurgedRunPartVerifies: the entries of orch.db's log about one purged run (its
// subject) verify after the purge and name the purge (its retention entry after the run's
// sealed one), and that bundle edited to drop the purge from purged_runs fails.
func TestRedTeam34_PurgedRunPartVerifies(t *testing.T) {
	h := newHome(t)
	o := h.orchDB(t)
	o.add(t, orun{id: "r-old", name: "weekly", ended: ago(200), sealed: true, tasks: 3})
	o.add(t, orun{id: "r-other", ended: ago(200), sealed: true, tasks: 1})
	if _, _, err := h.sweeper(runsPolicy).Run(context.Background(), "ops", retention.RoleOperator, nil); err != nil {
		t.Fatal(err)
	}
	b, key := exportOrch(t, o, audit.Selection{Subjects: []string{"run/r-old"}})
	rep := verify.Verify(b, verify.Options{Key: key})
	if !rep.OK || len(b.PurgedRuns) != 1 || b.PurgedRuns[0].Run != "r-old" {
		t.Fatalf("the purged run's part: ok %v, purged_runs %+v, failed %+v", rep.OK, b.PurgedRuns, rep.Failed())
	}
	dropped := *b
	dropped.PurgedRuns = nil
	if rep := verify.Verify(&dropped, verify.Options{Key: key}); rep.OK {
		t.Fatal("the purged run's part verified with its purge dropped from purged_runs")
	}
}
