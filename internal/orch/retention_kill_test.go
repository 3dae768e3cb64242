package orch_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// Retention beside the row log (then its fix): a run a waiting row log record
// names is kept, whatever else waits, and a run no record names is purged while others'
// records wait, so a serve that is never idle still purges. Both crashes that leave a sealed
// run's rows in the log are made by a real child process killed with SIGKILL: between the
// commit that sealed the run and its fold, and inside the fold's transaction.

const retentionKillEnv = "AGORA_ORCH_RETENTION_KILL_CHILD"

// sealKill holds task "a" until release is closed, kills its own process when task "b"
// starts, and succeeds every other attempt at once.
type sealKill struct {
	started chan struct{}
	release chan struct{}
}

func (k *sealKill) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	switch a.TaskID {
	case "a":
		go func() {
			k.started <- struct{}{}
			<-k.release
			done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
		}()
	case "b":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	default:
		go done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
	}
}

func (*sealKill) Cancel(context.Context, string) {}

// retentionChild runs in the child process: mode "seal" or "fold".
func retentionChild(t *testing.T, mode, path string) {
	ctx := context.Background()
	db := openDB(t, path)
	ex := &sealKill{started: make(chan struct{}, 1), release: make(chan struct{})}
	if mode == "fold" {
		orch.SetInFold(func() { syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} })
	}
	eng, err := orch.Open(ctx, db, audit.New(nil), ex, orch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orch.SetFoldIdle(eng, time.Hour)
	go eng.Run(ctx)
	// The run no record names: ended, sealed, and folded at once (the seal's fold).
	done := submitTo(t, eng, mkPlan(t, "done", 2, spec{ID: "c1"}, spec{ID: "c2", Deps: []string{"c1"}}))
	if mode == "fold" {
		agoratest.AwaitOwnKill(t, "the seal's fold") // SetInFold kills the process
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		r, err := eng.Status(ctx, done)
		var waiting bool
		if err == nil {
			err = db.SQL().QueryRow(`SELECT EXISTS (SELECT 1 FROM row_log)`).Scan(&waiting)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Sealed && !waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("run done was not sealed and folded in a minute")
		}
	}
	// a holds lock L; b waits for it in another run (L: "lock"); a's end seals run "sealed" and fires b
	// in one batch, and b's Start, after that commit and before the seal's fold, kills.
	submitTo(t, eng, mkPlan(t, "sealed", 2, spec{ID: "a", Locks: []any{"lock"}}))
	<-ex.started
	submitTo(t, eng, mkPlan(t, "waiting", 2, spec{ID: "b", Locks: []any{"lock"}}))
	close(ex.release)
	agoratest.AwaitOwnKill(t, "task b's start") // sealKill kills the process
}

func submitTo(t *testing.T, eng *orch.Engine, p *plan.Plan) string {
	t.Helper()
	id, _, err := eng.Submit(context.Background(), p, orch.Checkout{}, "tester")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// killRetentionChild runs this test's child in mode on a new orch.db and returns its path once
// the child died of SIGKILL.
func killRetentionChild(t *testing.T, test, mode string) string {
	path := filepath.Join(t.TempDir(), "orch.db")
	cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$", "-test.count", "1")
	cmd.Env = append(os.Environ(), retentionKillEnv+"="+mode+":"+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed: %v\n%s", err, out)
	}
	return path
}

// runIDs reads orch.db's runs by plan name, and whether each is sealed.
func runIDs(t *testing.T, db *store.DB) (ids map[string]string, sealed map[string]bool) {
	t.Helper()
	ids, sealed = map[string]string{}, map[string]bool{}
	rows, err := db.SQL().Query(`SELECT id, name, sealed_at != '' FROM runs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		var s bool
		if err := rows.Scan(&id, &name, &s); err != nil {
			t.Fatal(err)
		}
		ids[name], sealed[name] = id, s
	}
	return ids, sealed
}

const keepAge = 24 * time.Hour

// runSnapshot is run id's rows through the overlay and its fired and succeeded entries.
func runSnapshot(t *testing.T, db *store.DB, id string) orch.RowsSnapshot {
	t.Helper()
	lo, hi := entry.Task(id, ""), entry.Task(id, "")+"\xff"
	s, err := orch.Snapshot(context.Background(), db.SQL(), id, entry.TaskFired, entry.TaskSucceeded, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkKeptThenPurged is the parent's half: with the crash's records waiting, a plan keeps
// run kept (named by them) and purges purge (named by none, "" for no such run); the next
// Open folds exactly the state a reader saw before it, and the plan after it purges kept
// with every task and attempt counted in its retention.run_purged entry.
func checkKeptThenPurged(t *testing.T, path, kept, purge string) {
	ctx := context.Background()
	later := time.Now().Add(keepAge + time.Hour)
	ro, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ids, sealed := runIDs(t, ro)
	if !sealed[kept] {
		t.Fatalf("run %s was not sealed before the kill: the test attacked nothing", kept)
	}
	var naming int
	if err := ro.SQL().QueryRow(`SELECT count(*) FROM row_log WHERE runs LIKE '%"' || ? || '"%'`, ids[kept]).Scan(&naming); err != nil {
		t.Fatal(err)
	}
	if naming == 0 {
		t.Fatalf("no waiting record names run %s: the test attacked nothing", kept)
	}
	before := runSnapshot(t, ro, ids[kept])
	items, k, err := retention.PlanRuns(ctx, ro.SQL(), keepAge, later)
	ro.Close()
	if err != nil {
		t.Fatal(err)
	}
	if k.Unfolded != 1 || !reflect.DeepEqual(k.UnfoldedRuns, []string{ids[kept]}) {
		t.Errorf("kept %+v; want run %s kept as unfolded, alone", k, ids[kept])
	}
	var want []string
	if purge != "" {
		want = []string{ids[purge]}
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Run)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with run %s's records waiting, planned %v; want %v", ids[kept], got, want)
	}
	db := openDB(t, path)
	defer db.Close()
	log := audit.New(nil).SparseTree()
	var res retention.Result
	if err := retention.PurgeRuns(ctx, db, log, items, keepAge, later, "ops", retention.RoleOperator, &res); err != nil || res.Runs != len(want) {
		t.Fatalf("purge of %v: %+v, %v", want, res, err)
	}
	if _, err := orch.Open(ctx, db, audit.New(nil), newFakeExec(succeed), orch.Options{}); err != nil {
		t.Fatal(err)
	}
	after := runSnapshot(t, db, ids[kept])
	if after.Unfolded != 0 {
		t.Errorf("Open left %d records", after.Unfolded)
	}
	before.Unfolded = 0
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the fold at Open made another state than the crash left:\nbefore %+v\nafter  %+v", before, after)
	}
	items, k, err = retention.PlanRuns(ctx, db.SQL(), keepAge, later)
	if err != nil || len(items) != 1 || items[0].Run != ids[kept] || k.Unfolded != 0 {
		t.Fatalf("after the fold: planned %+v, kept %+v, %v; want run %s", items, k, err, ids[kept])
	}
	if items[0].Tasks != len(before.Tasks) || items[0].Attempts != len(before.Attempts) {
		t.Errorf("planned %d tasks and %d attempts; the run had %d and %d", items[0].Tasks, items[0].Attempts, len(before.Tasks), len(before.Attempts))
	}
	res = retention.Result{}
	if err := retention.PurgeRuns(ctx, db, log, items, keepAge, later, "ops", retention.RoleOperator, &res); err != nil || res.Runs != 1 ||
		res.RunAttempts != len(before.Attempts) {
		t.Fatalf("purge after the fold: %+v, %v; want 1 run of %d attempts", res, err, len(before.Attempts))
	}
}

// TestRetention_KillBetweenSealAndFold: a kill -9 after the commit that sealed run "sealed"
// and before its fold leaves its last rows in the log. The sweep keeps it and purges run
// "done", whose records were folded, while another run's records wait.
func TestRetention_KillBetweenSealAndFold(t *testing.T) {
	if env := os.Getenv(retentionKillEnv); env != "" {
		mode, path, _ := strings.Cut(env, ":")
		retentionChild(t, mode, path)
		return
	}
	path := killRetentionChild(t, "TestRetention_KillBetweenSealAndFold", "seal")
	checkKeptThenPurged(t, path, "sealed", "done")
}

// TestRetention_KillInFold: a kill -9 inside the fold's transaction (its rows written, its
// records not yet deleted) leaves the tables and the log as they were: the sweep keeps the
// sealed run, and the next Open folds it exactly.
func TestRetention_KillInFold(t *testing.T) {
	if env := os.Getenv(retentionKillEnv); env != "" {
		mode, path, _ := strings.Cut(env, ":")
		retentionChild(t, mode, path)
		return
	}
	path := killRetentionChild(t, "TestRetention_KillInFold", "fold")
	checkKeptThenPurged(t, path, "done", "")
}
