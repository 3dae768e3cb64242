package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/store"
)

// TestServe_RealPodWarmSlotHeldByServe on a real kubelet: `agora orch serve
// --gateway` holds the kubernetes target's `warm: 1` as a standby supervisor, and the next
// dispatch runs in that slot's pod (its worker claims over serve's gateway), supervised by the
// standby, and ends as the cold one did: finished, its patch, on its first attempt, with the
// same state, isolation and audit entries (kinds, in order) as the cold one. (kwok runs
// no worker: TestServe_KubernetesWarmSlotsHeldByServe cannot see a claim succeed.)
func TestServe_RealPodWarmSlotHeldByServe(t *testing.T) {
	e := newRealPodEnv(t)
	cfgPath := filepath.Join(e.home, "agora.yaml")
	cfg, err := os.ReadFile(cfgPath)
	must(t, err)
	if !strings.Contains(string(cfg), "    node_selector:") {
		t.Fatalf("agora.yaml has no k8s target to make warm:\n%s", cfg)
	}
	must(t, os.WriteFile(cfgPath, []byte(strings.Replace(string(cfg), "    node_selector:", "    warm: 1\n    node_selector:", 1)), 0o600))
	e.openGate()
	serve := e.serveGateway()
	t.Cleanup(func() {
		serve.Process.Kill()
		serve.Wait()
		for _, pid := range standbys(t, e.env) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	run := func(name string) (string, time.Duration) {
		t.Helper()
		p := filepath.Join(t.TempDir(), name+".yaml")
		must(t, os.WriteFile(p, []byte("version: 1\nname: "+name+"\ndefaults: {target: k8s}\ntasks:\n  - {id: t0, subagent: worker, input: {n: 1}}\n"), 0o644))
		start := time.Now()
		runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0])
		r := waitRun(t, e.client(), runID, 4*time.Minute)
		took := time.Since(start)
		e.checkFirstAttempts(r, "task.json")
		return r.Tasks[0].DispatchID, took
	}
	// The first dispatch starts cold and teaches the target its shape; the restarted serve
	// starts the standby at once.
	coldID, cold := run("cold")
	must(t, serve.Process.Signal(syscall.SIGTERM))
	serve.Wait()
	serve = e.serveGateway()
	agoratest.WaitFor(t, 3*time.Minute, "doctor to count the kubernetes slot ready", func() bool {
		return strings.Contains(e.run("doctor"), "k8s: warm 1/1 ready")
	})
	held := standbys(t, e.env)
	if len(held) != 1 {
		t.Fatalf("standby supervisors %v, want one", held)
	}
	id, warm := run("warm")
	t.Logf("dispatch through serve on the real kubelet: cold %s, warm %s", cold.Round(time.Millisecond), warm.Round(time.Millisecond))
	db, err := store.Open(t.Context(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	pid := supervisorPID(t, db, id)
	if pid != held[0] {
		t.Errorf("the warm dispatch %s was supervised by %d, not the standby %d", id, pid, held[0])
	}
	// Indistinguishable in record and audit from the cold one: the same state and
	// isolation, and the same audit entries in the same order.
	var coldIso, coldState, warmIso, warmState string
	must(t, db.SQL().QueryRow(`SELECT isolation, state FROM dispatches WHERE id = ?`, coldID).Scan(&coldIso, &coldState))
	must(t, db.SQL().QueryRow(`SELECT isolation, state FROM dispatches WHERE id = ?`, id).Scan(&warmIso, &warmState))
	if coldIso != warmIso || coldState != warmState {
		t.Errorf("warm dispatch %s/%q, cold %s/%q", warmState, warmIso, coldState, coldIso)
	}
	if cold, warm := auditKinds(t, db, coldID), auditKinds(t, db, id); strings.Join(cold, " ") != strings.Join(warm, " ") {
		t.Errorf("audit of the warm dispatch:\n%v\nof the cold one:\n%v", warm, cold)
	}
	db.Close()
	claimed := false
	for _, by := range slotJobs(t, e.c) {
		claimed = claimed || by == id
	}
	if !claimed {
		t.Errorf("no slot Job was claimed by %s: %v", id, slotJobs(t, e.c))
	}
}
