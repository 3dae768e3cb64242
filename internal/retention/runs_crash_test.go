package retention_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// runCrashHomeEnv names the home the child process purges in TestRuns_Kill9BetweenRecordAndDelete.
const runCrashHomeEnv = "AGORA_RETENTION_RUN_CRASH_HOME"

// TestRuns_Kill9BetweenRecordAndDelete: a sweep killed (SIGKILL, a real process) after it
// appended a batch's retention.run_purged entries and before it deleted the runs' rows leaves
// neither: the record and the deletion are one orch.db transaction. orch.db's log still
// verifies, and the next sweep purges each run once.
func TestRuns_Kill9BetweenRecordAndDelete(t *testing.T) {
	if dir := os.Getenv(runCrashHomeEnv); dir != "" {
		runCrashChild(t, dir)
		return
	}
	h := newHome(t)
	o := h.orchDB(t)
	for i := range 40 {
		o.add(t, orun{id: "r" + string(rune('A'+i)), ended: ago(200), sealed: true, tasks: 3})
	}
	entriesBefore := count(t, o.db.SQL(), `SELECT count(*) FROM audit_entries`)
	marker := filepath.Join(h.dir, "recorded")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRuns_Kill9BetweenRecordAndDelete$", "-test.count=1")
	cmd.Env = append(os.Environ(), runCrashHomeEnv+"="+h.dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the child never recorded its run purges")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	if n := count(t, o.db.SQL(), `SELECT count(*) FROM audit_entries`); n != entriesBefore {
		t.Fatalf("%d audit entries after the kill, %d before: an entry outlived its transaction", n, entriesBefore)
	}
	if n := count(t, o.db.SQL(), `SELECT count(*) FROM runs`); n != 40 {
		t.Fatalf("%d runs after the kill, want 40: rows deleted with no record", n)
	}
	verifyOrchLog(t, o)
	plan, res, err := h.sweeper(runsPolicy).Run(context.Background(), "system", retention.RoleSweep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Runs) != 40 || res.Runs != 40 || res.RunTasks != 120 {
		t.Fatalf("restart: %d planned, result %+v: want all 40 purged", len(plan.Runs), res)
	}
	if n := count(t, o.db.SQL(), `SELECT count(*) FROM audit_entries WHERE kind = 'retention.run_purged'`); n != 40 {
		t.Fatalf("%d retention.run_purged entries, want one per run", n)
	}
	if n := count(t, o.db.SQL(), `SELECT count(*) FROM tasks`) + count(t, o.db.SQL(), `SELECT count(*) FROM runs`); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	verifyOrchLog(t, o)
}

// runCrashChild sweeps dir's home and stops (until killed) inside the first run batch, after
// its entries are appended and before its rows are deleted.
func runCrashChild(t *testing.T, dir string) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(dir, "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	bs, err := blob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	retention.SetAfterRunRecord(func() {
		os.WriteFile(filepath.Join(dir, "recorded"), nil, 0o600)
		agoratest.Hang() // until the parent kills it
	})
	path := filepath.Join(dir, "orch", "orch.db")
	s := &retention.Sweeper{DB: db, OrchDB: path, Blobs: bs, Policy: runsPolicy, Log: audit.New(nil), Now: func() time.Time { return now },
		OpenOrch: func(ctx context.Context) (*store.DB, error) { return store.Open(ctx, path, orch.Migrations()) }}
	s.Run(ctx, "system", retention.RoleSweep, nil)
	t.Fatal("the sweep returned past the hook")
}
