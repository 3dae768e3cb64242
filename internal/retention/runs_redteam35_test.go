package retention_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/retention"
)

// rowLogRecord is one orch row_log record (orch's rowlog.go, version 1) as the engine writes
// it for a batch that ends task idx of run: the task's image succeeded, and its attempt fired
// and ended in the same batch. Written here byte by byte, as a crash leaves it unfolded.
func rowLogRecord(run string, idx int, dispatch, at string) []byte {
	u := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	s := func(b []byte, v string) []byte { return append(u(b, len(v)), v...) }
	b := []byte{1}
	b = s(u(b, 1), run)
	// One task image: run 0, idx, state, attempts, failures, dispatch, ready_seq, retry_at,
	// reason, detail, question, answer, cancel, review.
	b = u(b, 1)
	b = u(u(b, 0), idx)
	b = s(b, "succeeded")
	b = u(u(b, 1), 0)
	b = s(b, dispatch)
	b = u(b, 7)
	for range 5 {
		b = s(b, "")
	}
	b = s(append(b, 0), "")
	// One attempt fired: dispatch, run 0, task idx, number, parent, inputs, fired_at.
	b = s(u(b, 1), dispatch)
	b = u(u(u(b, 0), idx), 1)
	b = s(s(s(b, ""), "[]"), at)
	// Its end: id, state, reason, ended_at, usage, verdict.
	b = s(u(b, 1), dispatch)
	b = s(s(s(s(s(b, "succeeded"), ""), at), ""), "")
	return b
}

// TestRedTeam35_PurgeWaitsForTheRowLog is the attack of retention purging a sealed run while
// a crash left its last batch in orch.db's row log, unfolded: its second task's attempt is
// only in the log. The purge counted the attempts table (the retention.run_purged entry said
// 1 attempt of a run that fired 2) and the fold then dropped the log's rows of the purged run,
// so the audit entry and the rows disagreed. A run is kept while the log holds records, and
// purged whole, with the right count, once the engine's Open folded it.
func TestRedTeam35_PurgeWaitsForTheRowLog(t *testing.T) {
	h := newHome(t)
	o := h.orchDB(t)
	o.add(t, orun{id: "r-crash", ended: ago(200), sealed: true, tasks: 1})
	if _, err := o.db.SQL().Exec(`INSERT INTO tasks(run_id, idx, id, state) VALUES ('r-crash', 1, 't1', 'running')`); err != nil {
		t.Fatal(err)
	}
	if _, err := o.db.SQL().Exec(`INSERT INTO row_log(record) VALUES (?)`, rowLogRecord("r-crash", 1, "r-crash-d1", ago(200))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan, res, err := h.sweeper(runsPolicy).Run(ctx, "ops", retention.RoleOperator, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Runs) != 0 || res.Runs != 0 || plan.RunsKept.Unfolded != 1 {
		t.Fatalf("with the run's last batch unfolded: planned %+v, kept %+v, result %+v; want it kept (1 unfolded)", plan.Runs, plan.RunsKept, res)
	}
	if n := o.rowsOf(t, "r-crash"); n == 0 {
		t.Fatal("the run was purged while the row log held its rows")
	}
	// serve's engine folds the log at Open.
	if _, err := orch.Open(ctx, o.db, o.log, nil, orch.Options{}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, o.db.SQL(), `SELECT count(*) FROM row_log`); n != 0 {
		t.Fatalf("Open left %d records", n)
	}
	plan, res, err = h.sweeper(runsPolicy).Run(ctx, "ops", retention.RoleOperator, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Runs) != 1 || res.Runs != 1 || res.RunTasks != 2 || res.RunAttempts != 2 {
		t.Fatalf("after the fold: planned %+v, result %+v; want the run purged with 2 tasks and 2 attempts", plan.Runs, res)
	}
	var body string
	if err := o.db.SQL().QueryRow(`SELECT entry FROM audit_entries WHERE kind = 'retention.run_purged'`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `"attempts":2`) || !strings.Contains(body, `"tasks":2`) {
		t.Errorf("the purge's entry does not count the run's rows: %s", body)
	}
}
