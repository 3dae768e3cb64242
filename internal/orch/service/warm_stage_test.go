package service_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
)

// mountsBelow lists the mount points at or below dir in this mount namespace.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	var out []string
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// TestServe_Kill9StagedStandby: a standby's slot stages its dispatch's
// directories and disk quota at fill. A standby killed with -9 before any claim, and one
// killed while its claimed dispatch runs on that stage, leave nothing: the stage's quota is
// unmounted and its directory removed by the sweep, the dispatch ends failed/lost, and no
// later dispatch runs on either stage.
func TestServe_Kill9StagedStandby(t *testing.T) {
	e, _ := warmServedEnv(t, 1)
	db := openAgoraDB(t, e)
	kill := func(pid int, slot string) {
		t.Helper()
		kids := children(pid)
		must(t, syscall.Kill(pid, syscall.SIGKILL))
		agoratest.WaitFor(t, 30*time.Second, "the killed standby and its sandbox to exit, and its slot to be swept", func() bool {
			for _, k := range append(kids, pid) {
				if err := syscall.Kill(k, 0); !errors.Is(err, syscall.ESRCH) {
					return false
				}
			}
			_, err := os.Stat(slot)
			return errors.Is(err, os.ErrNotExist)
		})
		if m := mountsBelow(t, slot); len(m) > 0 {
			t.Errorf("mounts of the killed standby's slot remain: %v", m)
		}
	}

	// Before any claim.
	ready, slots := idleStandbys(t, e), readySlots(t, e)
	if len(ready) != 1 || len(slots) != 1 {
		t.Fatalf("standbys %v, slots %v: want one each", ready, slots)
	}
	if m := mountsBelow(t, filepath.Join(slots[0], "stage")); len(m) == 0 {
		t.Fatalf("the ready standby's slot %s has no staged quota mounted", slots[0])
	}
	kill(ready[0], slots[0])

	// During a claim: the dispatch runs on the stage when its standby is killed.
	waitStandbys(t, e, 1)
	ready, slots = idleStandbys(t, e), readySlots(t, e)
	planPath := filepath.Join(t.TempDir(), "slow.yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: slow\ntasks:\n  - id: slow\n    subagent: sleeper\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	var first string
	agoratest.WaitFor(t, 30*time.Second, "the slow task to start", func() bool {
		return db.SQL().QueryRow(`SELECT id FROM dispatches WHERE state = 'started' AND subagent LIKE 'sleeper%'`).Scan(&first) == nil
	})
	if pid := supervisorPID(t, db, first); !contains(ready, pid) {
		t.Fatalf("the slow dispatch runs under %d, not the ready standby %v", pid, ready)
	}
	ws := filepath.Join(slots[0], "stage", "disk", "workspace")
	if _, err := os.Stat(filepath.Join(ws, "task.json")); err == nil {
		t.Fatalf("the staged workspace holds another dispatch's file")
	}
	if m := mountsBelow(t, filepath.Join(slots[0], "stage", "disk")); len(m) == 0 {
		t.Fatalf("the claimed dispatch's stage %s is not the slot's quota", ws)
	}
	if m := mountsBelow(t, filepath.Join(e.home, "dispatches", first)); len(m) > 0 {
		t.Errorf("mounted for the claimed dispatch: %v", m)
	}
	kill(supervisorPID(t, db, first), slots[0])
	waitRun(t, e.client(), runID, 2*time.Minute)
	var state, reason string
	must(t, db.SQL().QueryRow(`SELECT state, reason FROM dispatches WHERE id = ?`, first).Scan(&state, &reason))
	if state != "failed" || reason != "lost" {
		t.Errorf("the killed standby's dispatch ended %s/%s, want failed/lost", state, reason)
	}
	if m := mountsBelow(t, filepath.Join(e.home, "dispatches", first)); len(m) > 0 {
		t.Errorf("mounts under the lost dispatch's stage: %v", m)
	}
}
