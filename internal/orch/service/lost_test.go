package service_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// TestServe_LostWorkerRetried kills an attempt's supervisor with SIGKILL (its sandboxed worker
// dies with it): serve records the attempt failed/lost and, the task's policy permitting,
// runs a second attempt that succeeds.
func TestServe_LostWorkerRetried(t *testing.T) {
	e := servedEnv(t)
	planPath := filepath.Join(t.TempDir(), "lost.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: lost
tasks:
  - id: slow
    subagent: sleeper
    retry: {max_attempts: 2, initial_backoff: 10ms}
`), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])

	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	defer db.Close()
	var first, supervisor string
	deadline := time.Now().Add(30 * time.Second)
	for supervisor == "" {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt did not start within 30s")
		}
		time.Sleep(20 * time.Millisecond)
		db.SQL().QueryRow(`SELECT id, supervisor FROM dispatches WHERE state = 'started' AND supervisor != ''`).Scan(&first, &supervisor)
	}
	pidStr, _, _ := strings.Cut(supervisor, ":")
	pid, err := strconv.Atoi(pidStr)
	must(t, err)
	must(t, syscall.Kill(pid, syscall.SIGKILL))

	run := waitRun(t, e.client(), runID, time.Minute)
	if run.State != lifecycle.RunSucceeded || run.Tasks[0].Attempts != 2 {
		t.Fatalf("run %s, task %+v; want succeeded on its second attempt", run.State, run.Tasks[0])
	}
	var state, reason string
	must(t, db.SQL().QueryRow(`SELECT state, reason FROM dispatches WHERE id = ?`, first).Scan(&state, &reason))
	if state != "failed" || reason != "lost" {
		t.Errorf("first attempt's dispatch ended %s/%s, want failed/lost", state, reason)
	}
	odb, err := store.Open(context.Background(), filepath.Join(e.home, "orch", "orch.db"), orch.Migrations())
	must(t, err)
	defer odb.Close()
	must(t, odb.SQL().QueryRow(`SELECT state, reason FROM attempts WHERE dispatch_id = ?`, first).Scan(&state, &reason))
	if state != "failed" || reason != "lost" {
		t.Errorf("first attempt ended %s/%s in orch.db, want failed/lost", state, reason)
	}
}
