package cli_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestLeaderLease_TakeoverRestores with the real binary, a real control plane and
// versitygw: two replicas of one home (the same keys/, blobs.s3 and replicate.s3, lag 200ms)
// on one Lease. a leads and runs a chain of four tasks; while c runs (and after a and b's
// successes are in the bucket) a is killed with SIGKILL. b takes the Lease, restores the home
// from the replica, records leader.acquired (restored, previous a) and finishes the run: a, b
// and d run once each, c (in flight at the kill) once or twice.
func TestLeaderLease_TakeoverRestores(t *testing.T) {
	if err := local.Available(); err != nil {
		t.Skipf("SKIP: bubblewrap sandbox not available here: %v", err)
	}
	srv := s3test.Shared(t)
	c := k8stest.Shared(t, k8stest.Options{}).InNewNamespace(t) // the package's one control plane; its leases are named apart
	dir := t.TempDir()
	w := &leaseWorld{t: t, bin: builtAgora(t), dir: dir, cluster: c, lease: fmt.Sprintf("agora-takeover-%d", os.Getpid())}
	d := &drill{t: t, bin: w.bin, dir: dir, backup: filepath.Join(dir, "backup"), srv: srv}
	envA, envB, plan := takeoverHomes(t, w, d)

	a := w.serve(envA)
	w.waitLog(a, "orchestrator serving on")
	b := w.serve(envB)
	w.waitLog(b, "standby: waiting for the leader lease")
	id := submitUntilReplicated(t, w, d, a, envA, plan)
	killed := time.Now()
	a.cmd.Process.Signal(syscall.SIGKILL)
	took := w.waitLog(b, "leader: holding lease")
	w.waitLog(b, "restored orch.db from the replica")
	serving := w.waitLog(b, "orchestrator serving on")
	t.Logf("takeover after SIGKILL: b leads after %s, serves the restored home after %s (lease duration %s)",
		took.Sub(killed).Round(time.Millisecond), serving.Sub(killed).Round(time.Millisecond), testLease)
	r := d.waitEnded(envB, id, 2*time.Minute, b.log)
	if r.State != "succeeded" {
		t.Fatalf("b did not finish the run: %+v\n%s", r, b.log())
	}
	for x, want := range map[string]int{"a": 1, "b": 1, "d": 1} {
		if _, n := r.task(x); n != want {
			t.Errorf("task %s ran %d times, want %d: %+v", x, n, want, r)
		}
	}
	if _, n := r.task("c"); n < 1 || n > 2 {
		t.Errorf("task c (in flight at the kill) ran %d times, want 1 or 2", n)
	}
	var entries []struct {
		Kind    string         `json:"kind"`
		Details map[string]any `json:"details"`
	}
	out := w.must(envB, "audit", "log", "--kind", "leader.acquired", "-o", "json")
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatal(err)
	}
	last := entries[len(entries)-1]
	if last.Details["identity"] != "b" || last.Details["previous"] != "a" || last.Details["restored"] != true {
		t.Errorf("b's leader.acquired: %+v, want identity b, previous a, restored", last)
	}
	// a's own leader.acquired came with the replica: the restored log is a's, continued by b.
	if len(entries) != 2 || entries[0].Details["identity"] != "a" {
		t.Errorf("leader.acquired entries in the restored log: %+v, want a's then b's", entries)
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-b.done; err != nil {
		t.Errorf("b stopped by SIGTERM: %v\n%s", err, b.log())
	}
	b.done <- nil
}

// takeoverHomes makes a's home (d.setUp: replicate.s3, blobs.s3, the subagents) and b's as a
// copy of it, each with leader: on w's Lease under its own identity.
func takeoverHomes(t *testing.T, w *leaseWorld, d *drill) (envA, envB map[string]string, plan string) {
	dir := w.dir
	envA = map[string]string{"AGORA_HOME": filepath.Join(dir, "a"), "HOME": dir, "USER": "tester"}
	plan = d.setUp(envA) // replicate.s3 (lag 200ms) and blobs.s3, subagents quick and slow
	shared, err := os.ReadFile(filepath.Join(envA["AGORA_HOME"], "agora.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// b is a copy of a's home as it was set up (its databases are replaced when it takes over).
	envB = map[string]string{"AGORA_HOME": filepath.Join(dir, "b"), "HOME": dir, "USER": "tester"}
	if err := os.CopyFS(envB["AGORA_HOME"], os.DirFS(envA["AGORA_HOME"])); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(envB["AGORA_HOME"], func(p string, e fs.DirEntry, err error) error { // CopyFS leaves 0755 and 0644
		if err == nil && e.IsDir() {
			return os.Chmod(p, 0o700)
		}
		if err == nil {
			return os.Chmod(p, 0o600)
		}
		return err
	})
	// c's detached supervisor outlives a's serve and holds its dispatch's disk mounted in a's
	// home until it ends; the home goes once it has unmounted it.
	t.Cleanup(func() {
		agoratest.Eventually(t, time.Minute, "a's home to go", func() error { return os.RemoveAll(envA["AGORA_HOME"]) })
	})
	writeFiles(t, map[string]string{
		filepath.Join(envA["AGORA_HOME"], "agora.yaml"): string(shared) + w.leaderYAML("a"),
		filepath.Join(envB["AGORA_HOME"], "agora.yaml"): string(shared) + w.leaderYAML("b"),
	})
	return envA, envB, plan
}

// submitUntilReplicated submits plan to a (serving), waits until its task c runs, then until
// both databases were replicated from a snapshot read after that; it returns the run's id.
func submitUntilReplicated(t *testing.T, w *leaseWorld, d *drill, a *replica, envA map[string]string, plan string) string {
	out, err := w.cmd(envA, "orch", "submit", plan).Output()
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, a.log())
	}
	id := strings.TrimSpace(string(out))
	d.waitTask(envA, id, "c", "running", a.log)
	waitReplicated(t, envA["AGORA_HOME"], time.Now(), a.log)
	return id
}
