package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/store"
)

// TestDispatchOverStdio_WarmStandby: `agora mcp serve` holds a warm target's slots as standby
// supervisors as orch serve does: after the target's first (cold) dispatch, the next one
// runs in a standby's ready slot (its provider task id is that slot's sandbox).
func TestDispatchOverStdio_WarmStandby(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root (they attach a dispatch's files with mounts)")
	}
	home := newHome(t)
	f, err := os.OpenFile(filepath.Join(home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("targets:\n  local:\n    warm: 1\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Registered before the session, so it runs after the session's end: the home's standby
	// supervisors unmount their slots' stages as they exit, and the home's directory is removed
	// only once they are gone.
	t.Cleanup(func() {
		agoratest.WaitFor(t, time.Minute, "the home's standby supervisors to exit", func() bool { return len(agoratest.StandbyPIDs(home)) == 0 })
	})
	cs := stdioSession(t, home)
	var cold dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer", "envs": []string{"demo"}, "input": map[string]any{"task": "greet"}, "wait_seconds": 120}), &cold)
	if cold.Dispatch.State != "finished" {
		t.Fatalf("cold: %+v", cold)
	}
	// The standby that supervised the cold dispatch stays one until it has cleaned up after
	// it, and the slot it held may still be on disk: the ready slot is the one left once that
	// supervisor is gone.
	coldSupervisor := supervisorPID(t, home, cold.Dispatch.ID)
	var task []byte
	agoratest.WaitFor(t, time.Minute, "a ready standby slot, the cold dispatch's supervisor gone", func() bool {
		if coldSupervisor > 0 && agoratest.Running(coldSupervisor) {
			return false
		}
		dirs, _ := filepath.Glob(filepath.Join(home, "dispatches", ".warm", "local", "slot-*", "task"))
		if len(dirs) != 1 {
			return false
		}
		task, err = os.ReadFile(dirs[0])
		if err != nil {
			return false
		}
		// The slot's sandbox writes its task before its standby says ready, and a dispatch
		// finds a slot only once the holder has read that line: its status file says so.
		return readyStandbys(home, "local") == 1
	})
	var warm dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer", "envs": []string{"demo"}, "input": map[string]any{"task": "greet"}, "wait_seconds": 120}), &warm)
	if warm.Dispatch.State != "finished" {
		t.Fatalf("warm: %+v", warm)
	}
	var rec struct {
		ProviderTaskID string `json:"provider_task_id"`
	}
	if err := json.Unmarshal(agora(t, home, nil, "dispatch", "describe", warm.Dispatch.ID, "-o", "json"), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ProviderTaskID != string(task) {
		t.Fatalf("the second dispatch ran as task %s, not in the ready slot %s", strconv.Quote(rec.ProviderTaskID), strconv.Quote(string(task)))
	}
}

// readyStandbys is the number of ready standbys of target the home's living holders (here
// `agora mcp serve`) publish in their status files.
func readyStandbys(home, target string) int {
	holders, err := detach.ReadHolders(filepath.Join(home, "dispatches"))
	if err != nil {
		return 0
	}
	n := 0
	for _, h := range holders {
		for _, c := range h.Counts {
			if c.Target == target {
				n += c.Ready
			}
		}
	}
	return n
}

// supervisorPID is the pid of the process that supervised dispatch id (the dispatches row's
// supervisor, "PID:..."), 0 when it names none.
func supervisorPID(t *testing.T, home, id string) int {
	t.Helper()
	db, err := store.OpenReadOnly(t.Context(), filepath.Join(home, "agora.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sup string
	if err := db.SQL().QueryRowContext(t.Context(), `SELECT supervisor FROM dispatches WHERE id = ?`, id).Scan(&sup); err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.SplitN(sup, ":", 2)[0])
	return pid
}
