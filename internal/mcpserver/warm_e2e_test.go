package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestDispatchOverStdio_WarmStandby: `agora mcp serve` holds a warm target's slots as standby
// supervisors (#30) as orch serve does: after the target's first (cold) dispatch, the next one
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
	cs := stdioSession(t, home)
	var cold dispatchOut
	decode(t, call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer", "envs": []string{"demo"}, "input": map[string]any{"task": "greet"}, "wait_seconds": 120}), &cold)
	if cold.Dispatch.State != "finished" {
		t.Fatalf("cold: %+v", cold)
	}
	var task []byte
	agoratest.WaitFor(t, time.Minute, "a ready standby slot", func() bool {
		dirs, _ := filepath.Glob(filepath.Join(home, "dispatches", ".warm", "local", "slot-*", "task"))
		if len(dirs) != 1 {
			return false
		}
		task, err = os.ReadFile(dirs[0])
		return err == nil
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
