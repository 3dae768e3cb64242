package retention_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// sqlish is a run id naming SQL: ids are bound parameters everywhere, so it is only text.
const sqlish = `old'); DELETE FROM runs; --`

// TestRuns_PurgeAgedOnly: retention.runs 180d removes every row of a sealed run that ended
// 200 days ago, and of one whose id reads as SQL, recording each (no plan body) in orch.db's
// log; it keeps a live run, a young one, a failed run never sealed, a schedule's last run,
// runs whose end is in the future or does not parse, and one whose id has a slash (which the
// engine never writes: its entry's subject would not name a run). A second sweep purges nothing.
func TestRuns_PurgeAgedOnly(t *testing.T) {
	h := newHome(t)
	o := h.orchDB(t)
	o.add(t, orun{id: "r-old", ended: ago(200), sealed: true, tasks: 10})
	o.add(t, orun{id: sqlish, ended: ago(300), sealed: true, tasks: 2})
	o.add(t, orun{id: "r-young", ended: ago(10), sealed: true, tasks: 3})
	o.add(t, orun{id: "r-live", state: "running", tasks: 3})
	o.add(t, orun{id: "r-failed", state: "failed", ended: ago(200), tasks: 3})
	o.add(t, orun{id: "r-sched", ended: ago(200), sealed: true, tasks: 1})
	o.schedule(t, "nightly", "r-sched")
	o.add(t, orun{id: "r-future", ended: ago(-30), sealed: true, tasks: 1})
	o.add(t, orun{id: "r-garbage", ended: "yesterday", sealed: true, tasks: 1})
	o.add(t, orun{id: "r/slash", ended: ago(200), sealed: true, tasks: 1})
	ctx := context.Background()

	plan, err := h.sweeper(runsPolicy).Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Runs) != 2 || plan.Runs[0].Run != sqlish || plan.Runs[1].Run != "r-old" || plan.Runs[1].Tasks != 10 || plan.Runs[1].Attempts != 10 {
		t.Fatalf("planned %+v, want the SQL-ish run then r-old (oldest end first), 10 tasks and attempts", plan.Runs)
	}
	if k := plan.RunsKept; k.Unsealed != 1 || k.Scheduled != 1 || k.BadDate != 2 {
		t.Fatalf("kept %+v, want 1 unsealed, 1 scheduled, 2 bad dates", k)
	}
	_, res, err := h.sweeper(runsPolicy).Run(ctx, "ops", retention.RoleOperator, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 2 || res.RunTasks != 12 || res.RunAttempts != 12 || res.RunsSkipped != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, id := range []string{"r-old", sqlish} {
		if n := o.rowsOf(t, id); n != 0 {
			t.Errorf("run %q keeps %d rows after its purge", id, n)
		}
	}
	for _, id := range []string{"r-young", "r-live", "r-failed", "r-sched", "r-future", "r-garbage", "r/slash"} {
		if n := o.rowsOf(t, id); n == 0 {
			t.Errorf("run %q was purged", id)
		}
	}
	if n := count(t, o.db.SQL(), `SELECT count(*) FROM runs`); n != 7 {
		t.Fatalf("%d runs left, want 7", n)
	}
	rows, err := o.db.SQL().Query(`SELECT subject, actor, entry FROM audit_entries WHERE kind = 'retention.run_purged' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for rows.Next() {
		var subject, actor, body string
		if err := rows.Scan(&subject, &actor, &body); err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, subject)
		if actor != "ops" || strings.Contains(body, planBody) || !strings.Contains(body, `"role":"operator"`) ||
			!strings.Contains(body, "retention.runs 180d") || !strings.Contains(body, `"name":"nightly"`) {
			t.Errorf("entry %s", body)
		}
	}
	rows.Close()
	if len(subjects) != 2 || subjects[0] != "run/"+sqlish || subjects[1] != "run/r-old" {
		t.Fatalf("retention.run_purged subjects %q", subjects)
	}
	plan, res, err = h.sweeper(runsPolicy).Run(ctx, "ops", retention.RoleOperator, nil)
	if err != nil || len(plan.Runs) != 0 || res.Runs != 0 {
		t.Fatalf("second sweep: %d planned, result %+v, %v", len(plan.Runs), res, err)
	}
}

// TestRuns_StatusSaysPurged: asking for a purged run (status, the web reader) says it was
// purged by retention, when and why, and still matches orch.ErrNotFound; a run that never
// existed is plainly not found.
func TestRuns_StatusSaysPurged(t *testing.T) {
	h := newHome(t)
	o := h.orchDB(t)
	o.add(t, orun{id: "r-old", ended: ago(200), sealed: true, tasks: 2})
	ctx := context.Background()
	if _, _, err := h.sweeper(runsPolicy).Run(ctx, "system", retention.RoleSweep, nil); err != nil {
		t.Fatal(err)
	}
	_, err := orch.ReadStatus(ctx, o.db.SQL(), "r-old")
	if !errors.Is(err, orch.ErrNotFound) || !strings.Contains(err.Error(), `run "r-old" not found (purged by retention at`) ||
		!strings.Contains(err.Error(), "by system: retention.runs 180d: ended") || !strings.Contains(err.Error(), "orch.db audit entry") {
		t.Fatalf("status of a purged run: %v", err)
	}
	if _, err := orch.NewReader(o.db.SQL()).Run(ctx, "r-old"); !errors.Is(err, orch.ErrNotFound) || !strings.Contains(err.Error(), "purged by retention") {
		t.Fatalf("reader of a purged run: %v", err)
	}
	_, err = orch.ReadStatus(ctx, o.db.SQL(), "r-never")
	if !errors.Is(err, orch.ErrNotFound) || strings.Contains(err.Error(), "purged") {
		t.Fatalf("status of a run that never was: %v", err)
	}
}

// TestRuns_ChangedSincePlan: between the plan and the purge a schedule comes to name a
// planned run as its last run, another sweep purges one, and a run live at the plan ends
// (long ago, by a skewed clock): the purge re-reads each run in its transaction and leaves
// the first two (counted skipped), and the run that ended is not purged by a plan that
// never listed it.
func TestRuns_ChangedSincePlan(t *testing.T) {
	h := newHome(t)
	o := h.orchDB(t)
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		o.add(t, orun{id: id, ended: ago(200), sealed: true, tasks: 1})
	}
	o.add(t, orun{id: "r-live", state: "running", tasks: 1})
	ctx := context.Background()
	plan, err := h.sweeper(runsPolicy).Plan(ctx)
	if err != nil || len(plan.Runs) != 3 {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	o.schedule(t, "s", "r-a")
	if _, err := o.db.SQL().Exec(`DELETE FROM run_extensions WHERE run_id = 'r-b'; DELETE FROM attempts WHERE run_id = 'r-b';
		DELETE FROM tasks WHERE run_id = 'r-b'; DELETE FROM run_plans WHERE run_id = 'r-b'; DELETE FROM runs WHERE id = 'r-b'`); err != nil {
		t.Fatal(err)
	}
	if _, err := o.db.SQL().Exec(`UPDATE runs SET state = 'succeeded', ended_at = ?, sealed_at = ? WHERE id = 'r-live'`, ago(300), ago(300)); err != nil {
		t.Fatal(err)
	}
	var res retention.Result
	if err := retention.PurgeRuns(ctx, o.db, o.log, plan.Runs, runsPolicy.Runs, now, "ops", retention.RoleOperator, &res); err != nil {
		t.Fatal(err)
	}
	if res.Runs != 1 || res.RunsSkipped != 2 {
		t.Fatalf("result %+v, want r-c purged and r-a, r-b skipped", res)
	}
	if o.rowsOf(t, "r-a") == 0 || o.rowsOf(t, "r-live") == 0 || o.rowsOf(t, "r-c") != 0 {
		t.Fatal("wrong runs purged")
	}
	if n := count(t, o.db.SQL(), `SELECT count(*) FROM audit_entries WHERE kind = 'retention.run_purged'`); n != 1 {
		t.Fatalf("%d retention.run_purged entries, want 1: a skipped run is not recorded", n)
	}
}

// TestRuns_NoOrchDB: a home with no orch.db plans no runs and a sweep never creates one.
func TestRuns_NoOrchDB(t *testing.T) {
	h := newHome(t)
	plan, _, err := h.sweeper(runsPolicy).Run(context.Background(), "ops", retention.RoleOperator, nil)
	if err != nil || len(plan.Runs) != 0 {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "orch", "orch.db")); !os.IsNotExist(err) {
		t.Fatalf("the sweep created orch.db: %v", err)
	}
}

// TestRuns_OrchDBBeforeSchedules: an orch.db no agora with schedules has opened yet (read
// by the plan without migrating it) is planned from, and purged once opened (and migrated)
// for writing.
func TestRuns_OrchDBBeforeSchedules(t *testing.T) {
	h := newHome(t)
	path := filepath.Join(h.dir, "orch", "orch.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	migs := orch.Migrations()
	k := 0
	for k < len(migs) && migs[k].Name != "queues and schedules" {
		k++
	}
	if k == len(migs) {
		t.Fatal("no schedules migration in orch.Migrations")
	}
	db, err := store.Open(context.Background(), path, migs[:k])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at)
		VALUES ('r-old', 'nightly', 'sha256:11', 'succeeded', 'alice', ?, ?, ?)`, ago(300), ago(200), ago(200)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	plan, res, err := h.sweeper(runsPolicy).Run(context.Background(), "ops", retention.RoleOperator, nil)
	if err != nil || len(plan.Runs) != 1 || res.Runs != 1 {
		t.Fatalf("plan %+v, result %+v, %v", plan, res, err)
	}
}
