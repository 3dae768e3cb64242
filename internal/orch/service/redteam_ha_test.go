package service_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"golang.org/x/sys/unix"
)

// takeBack is a takeover by a replica whose volume (vol) holds what it left when it led
// before: the StatefulSet's pod of an earlier leader, restarted on its own PersistentVolume,
// takes the Lease back and restores the databases the leader since (home) last replicated.
// Its stages and gateway sessions are its volume's; everything else (the databases, keys,
// agora.yaml, blobs) is home's. home ends as that replica's home; the other's is moved aside.
func takeBack(t *testing.T, home, vol string) {
	t.Helper()
	other := home + ".other-leader"
	// Its pod's mounts (a root agora's stage quotas and pinned content) died with it.
	unmountStages(home)
	must(t, os.Rename(home, other))
	must(t, os.Rename(vol, home))
	for _, db := range []string{"agora.db", filepath.Join("orch", "orch.db")} {
		for _, suffix := range []string{"-wal", "-shm"} { // the volume's own: older than the restore
			if err := os.Remove(filepath.Join(home, db+suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	restoreFrom(t, other, home)
}

// TestRedHA_TakeoverBackOntoAStaleVolume (attack: leadership that comes back to
// a replica's old volume): replica A leads and exports a task's Job; A's pod dies (-9); B
// takes over, adopts the dispatch (its stage made again on B's volume) and the pod uploads its
// result to B; B dies (-9) before the Job ends. A's pod, restarted on its own volume, takes the
// Lease back (two successive takeovers: two leader kills, or a rollout that replaces both
// pods) with B's databases. A's volume still holds the stage and the gateway session A made
// before B led. The worker's result is on B's volume, not here: the dispatch must end lost
// (the plan runs it again), as when a stage is missing, never as the agent's failure.
//
// It broke before the fix: A's adopter found a stage (the one it made before B led), so it did
// not make it again (it restaged only a missing stage), and reconciled the stale out
// directory: failed/worker-failed, the agent blamed and the task not run again. A stage is
// now made again when the dispatch was adopted by another supervisor since it was made
// (adopt.go, adoptionsMark).
func TestRedHA_TakeoverBackOntoAStaleVolume(t *testing.T) {
	e := newK8sEnv(t)
	addr := e.gateway()
	serve := e.serve()
	planPath := filepath.Join(t.TempDir(), "takeback.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: takeback
defaults: {target: k8s}
tasks:
  - id: mid
    subagent: worker
    retry: {max_attempts: 2, initial_backoff: 10ms, on_worker_failed: false}
`), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	first := e.waitJobs(1)
	c := e.client()
	run, err := c.Status(context.Background(), runID)
	must(t, err)
	id := run.Tasks[0].DispatchID
	e.waitStarted(id)
	token := e.podToken(first[id][0])
	kill := func(serve *exec.Cmd, sup int) { // a pod's processes die together
		must(t, serve.Process.Signal(syscall.SIGKILL))
		must(t, syscall.Kill(sup, syscall.SIGKILL))
		serve.Wait()
	}

	// A dies; B takes over and adopts.
	kill(serve, e.supervisorPID(id))
	// What A's stage holds stays on A's volume. (The chart's agora runs as uid 10001: its
	// stages are plain directories on its volume. This test's agora runs as root, whose
	// workspace and out are on a tmpfs quota that a pod's restart would empty; their content
	// is kept here as a directory, as a non-root agora's would be.)
	keep := t.TempDir()
	quotas, _ := filepath.Glob(filepath.Join(e.home, "dispatches", "*", "disk"))
	for i, q := range quotas {
		if b, err := exec.Command("cp", "-a", q, filepath.Join(keep, fmt.Sprint(i))).CombinedOutput(); err != nil {
			t.Fatalf("keep %s: %v %s", q, err, b)
		}
	}
	takeOver(t, e.home)
	volA := e.home + ".volume-a"
	must(t, os.Rename(e.home+".old-leader", volA))
	for i, q := range quotas {
		dst := filepath.Join(volA, strings.TrimPrefix(q, e.home))
		must(t, os.RemoveAll(dst))
		if b, err := exec.Command("cp", "-a", filepath.Join(keep, fmt.Sprint(i)), dst).CombinedOutput(); err != nil {
			t.Fatalf("restore %s: %v %s", dst, err, b)
		}
	}
	if len(quotas) == 0 {
		t.Log("no disk quota mounted (an unprivileged agora): the stage is its volume's as it is")
	}
	serve = e.serveArgs("--gateway", addr)
	waitAdoptions := func(n int) {
		t.Helper()
		if !agoratest.Poll(time.Minute, func() bool { return len(e.adoptions()[id]) >= n }) {
			b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
			t.Fatalf("adoption %d of %s did not come within a minute; serve log:\n%s", n, id, b)
		}
	}
	waitAdoptions(1)

	// The pod uploads its result to B, the leader now.
	e.podAt(addr, id, token, "B").uploadOK()

	// A's stage keeps a mount of its own (its pinned content's tmpfs): a supervisor that died
	// in a mount namespace that lives on leaves its mounts, and the stale stage's removal
	// must not stop at the mount point.
	stalePinned := filepath.Join(volA, "dispatches", id, "pinned")
	must(t, os.MkdirAll(stalePinned, 0o700))
	if err := unix.Mount("tmpfs", stalePinned, "tmpfs", 0, "size=1m"); err != nil {
		t.Logf("no tmpfs on the stale stage (%v): its removal meets plain directories only", err)
	}
	t.Cleanup(func() { unix.Unmount(filepath.Join(e.home, "dispatches", id, "pinned"), unix.MNT_DETACH) })

	// B dies before the Job ends; A, on its own volume, takes the Lease back.
	kill(serve, e.supervisorPID(id))
	takeBack(t, e.home, volA)
	serve = e.serveArgs("--gateway", addr)
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	waitAdoptions(2)
	e.openGate()

	run = waitRun(t, c, runID, 3*time.Minute)
	t.Logf("dispatch %s: %s", id, e.run("dispatch", "describe", id))
	if state, reason := e.dispatchState(id); state != "failed" || reason != "lost" {
		t.Errorf("the dispatch whose result went to B, adopted again by A on its old volume, ended %s/%s; want failed/lost (its result is not on this replica)", state, reason)
	}
	if detail := e.dispatchDetail(id); strings.Contains(detail, "remove its stage") {
		t.Errorf("A could not remove its stale stage (a mount left in it): %s", detail)
	}
	if task := run.Tasks[0]; task.Attempts != 2 {
		t.Errorf("task mid ran %d attempts (%s); want 2: the attempt lost in the takeovers runs again", task.Attempts, task.State)
	}
}
