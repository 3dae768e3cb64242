package orch_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// killAtStart completes every attempt at once, and kills its own process with SIGKILL when
// the engine starts attempt number at: the engine calls Start only after the commit that
// fired it returned, and before it publishes the batch's events or answers its callers, so
// the process dies between a row log record's commit and the rest of its in-memory apply.
type killAtStart struct {
	at int64
	n  atomic.Int64
}

func (k *killAtStart) Start(ctx context.Context, a orch.Attempt, done func(orch.Outcome)) {
	if k.n.Add(1) == k.at {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	go done(orch.Outcome{DispatchID: a.DispatchID, State: lifecycle.TaskSucceeded})
}

func (*killAtStart) Cancel(context.Context, string) {}

const killChildEnv = "AGORA_ORCH_ROWLOG_KILL_CHILD"

// TestRowLog_KillBetweenCommitAndApply is the attack of a kill -9 between a row log record's
// commit and the engine's in-memory apply of its batch: a child process runs a layered DAG
// and kills itself in the 25th Start. What a reader then finds, before anything folds the
// log (a read-only connection, as `agora orch status` reads after a crash), must be one
// commit's state; and what the next Open folds into the tables must be exactly that state.
func TestRowLog_KillBetweenCommitAndApply(t *testing.T) {
	if path := os.Getenv(killChildEnv); path != "" {
		killChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "orch.db")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRowLog_KillBetweenCommitAndApply$", "-test.count", "1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed: %v\n%s", err, out)
	}
	ctx := context.Background()
	ro, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if err := ro.SQL().QueryRow(`SELECT id FROM runs`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	lo, hi := entry.Task(id, ""), entry.Task(id, "")+"\xff"
	before, err := orch.Snapshot(ctx, ro.SQL(), id, entry.TaskFired, entry.TaskSucceeded, lo, hi)
	ro.Close()
	if err != nil {
		t.Fatal(err)
	}
	if before.Unfolded == 0 {
		t.Fatal("the crash left no row log record unfolded: the test attacked nothing")
	}
	succeeded := 0
	for _, a := range before.Attempts {
		if a.State == lifecycle.TaskSucceeded {
			succeeded++
		}
	}
	if before.Fired != len(before.Attempts) || before.Done != succeeded || len(before.Tasks) != 30 {
		t.Fatalf("after the kill, before any fold: %d fired entries for %d attempts, %d succeeded entries for %d succeeded attempts, %d tasks",
			before.Fired, len(before.Attempts), before.Done, succeeded, len(before.Tasks))
	}
	db := openDB(t, path)
	defer db.Close()
	if _, err := orch.Open(ctx, db, audit.New(nil), newFakeExec(succeed), orch.Options{}); err != nil {
		t.Fatal(err)
	}
	after, err := orch.Snapshot(ctx, db.SQL(), id, entry.TaskFired, entry.TaskSucceeded, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if after.Unfolded != 0 {
		t.Errorf("Open left %d records unfolded", after.Unfolded)
	}
	before.Unfolded = 0
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the fold at Open made another state than the crash left:\nbefore %+v\nafter  %+v", before, after)
	}
}

// killChild runs a 30-task layered DAG on path with an engine that never folds while it runs.
func killChild(t *testing.T, path string) {
	db := openDB(t, path)
	eng, err := orch.Open(context.Background(), db, audit.New(nil), &killAtStart{at: 25}, orch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orch.SetFoldIdle(eng, time.Hour)
	go eng.Run(context.Background())
	if _, _, err := eng.Submit(context.Background(), mkPlan(t, "killed", 5, layered(3, 10, 3)...), orch.Checkout{}, "tester"); err != nil {
		t.Fatal(err)
	}
	agoratest.AwaitOwnKill(t, "the 25th start") // killAtStart kills the process
}

// TestRowLog_CorruptRecordFailsOpen: a record that does not decode (damaged bytes, or cut
// short) stops Open with an error naming it, never a panic and never skipped.
func TestRowLog_CorruptRecordFailsOpen(t *testing.T) {
	for name, rec := range map[string][]byte{"empty": {}, "version": {9, 0, 0, 0, 0}, "truncated": {1, 1, 5, 'r'}, "trailing": {1, 0, 0, 0, 0, 7}} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orch.db")
			db := openDB(t, path)
			defer db.Close()
			if _, err := db.SQL().Exec(`INSERT INTO row_log(record) VALUES (?)`, rec); err != nil {
				t.Fatal(err)
			}
			_, err := orch.Open(context.Background(), db, audit.New(nil), newFakeExec(succeed), orch.Options{})
			if err == nil || !strings.Contains(err.Error(), "orch.db row log record 1: damaged row log record") {
				t.Fatalf("Open over a damaged record: %v", err)
			}
			var n int
			db.SQL().QueryRow(`SELECT COUNT(*) FROM row_log`).Scan(&n)
			if n != 1 {
				t.Errorf("%d records left, want the damaged one kept", n)
			}
		})
	}
}
