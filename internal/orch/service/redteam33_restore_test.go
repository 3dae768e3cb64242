package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/s3"
	"github.com/agora-dev/agora/internal/store"
)

// drillEnv is a home whose blobs live in a versitygw bucket, whose agora.db and orch.db are
// replicated to it, and whose audit logs are anchored in an Object Lock bucket: what a lost
// disk leaves is the bucket and the operator's copies of agora.yaml and keys/.
type drillEnv struct {
	*env
	srv          *s3test.Server
	repl, locked s3.Config
	backup       string // the operator's copies: agora.yaml, keys/, s3.env
}

func newDrillEnv(t *testing.T) *drillEnv {
	t.Helper()
	requireBwrap(t)
	srv, err := s3test.Start()
	if err != nil {
		if strings.HasPrefix(err.Error(), "SKIP") {
			t.Skip(err.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	d := &drillEnv{srv: srv, repl: srv.Bucket(t, false), locked: srv.Bucket(t, true), backup: t.TempDir()}
	creds := filepath.Join(d.backup, "s3.env")
	must(t, os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600))
	loc := func(c s3.Config) string {
		return fmt.Sprintf("{endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}", c.Endpoint, c.Bucket, c.Prefix, creds)
	}
	yaml := fmt.Sprintf(`egress: {allow_private: [127.0.0.1/32]}
blobs:
  s3: %s
audit:
  checkpoint_every: 5
  anchors:
    - s3: {endpoint: %q, bucket: %s, prefix: %s, retention: 1d, credentials_file: %s}
replicate:
  s3: %s
  lag: 200ms
`, loc(d.repl), d.locked.Endpoint, d.locked.Bucket, d.locked.Prefix, creds, loc(d.repl))
	d.env = newEnvConfig(t, yaml)
	must(t, os.WriteFile(filepath.Join(d.backup, "agora.yaml"), []byte(yaml), 0o600))
	must(t, os.CopyFS(filepath.Join(d.backup, "keys"), os.DirFS(filepath.Join(d.home, "keys"))))
	return d
}

// restore runs `agora restore --to dir` from the operator's copies; it returns the exit error
// and the combined output.
func (d *drillEnv) restore(dir string) (string, error) {
	cmd := exec.Command(agoraBin, "restore", "--to", dir, "--config", filepath.Join(d.backup, "agora.yaml"),
		"--keys", filepath.Join(d.backup, "keys"))
	cmd.Env = append(os.Environ(), "HOME="+d.backup)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// succeededTasks reads orch.db (read-only) and returns the run's tasks whose success is committed.
func succeededTasks(t *testing.T, path, runID string) map[string]bool {
	t.Helper()
	db, err := store.OpenReadOnly(context.Background(), path)
	must(t, err)
	defer db.Close()
	rows, err := db.SQL().Query(`SELECT id FROM tasks WHERE run_id = ? AND state = ?`, runID, lifecycle.TaskSucceeded)
	must(t, err)
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		must(t, rows.Scan(&id))
		out[id] = true
	}
	must(t, rows.Err())
	return out
}

// replicatedSince waits until serve's status files say both databases are replicated as of a
// time after t0 (every commit before t0 is in the bucket).
func (d *drillEnv) replicatedSince(t *testing.T, t0 time.Time) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, db := range []string{"agora", "orch"} {
		for {
			var st struct {
				Replicated time.Time `json:"replicated"`
				Error      string    `json:"error"`
			}
			b, err := os.ReadFile(filepath.Join(d.home, db+"-replicate.json"))
			if err == nil && json.Unmarshal(b, &st) == nil && st.Replicated.After(t0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not replicated past %s within a minute: %s %v", db, t0, b, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// loseMachine is the machine dying at once: serve and every process of the home (the dispatch
// supervisors serve started outlive serve, and would go on committing and anchoring on a disk
// that is about to be lost) are stopped together, then killed with -9.
func (d *drillEnv) loseMachine(t *testing.T, serve *exec.Cmd) {
	t.Helper()
	procs := []int{serve.Process.Pid}
	must(t, serve.Process.Signal(syscall.SIGSTOP))
	mark := []byte("\x00AGORA_HOME=" + d.home + "\x00")
	for range 2 { // again: a supervisor may have been starting during the first pass
		dirs, err := os.ReadDir("/proc")
		must(t, err)
		for _, de := range dirs {
			pid, err := strconv.Atoi(de.Name())
			if err != nil || pid == os.Getpid() || slices.Contains(procs, pid) {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", de.Name(), "environ"))
			if err != nil || !bytes.Contains(append([]byte{0}, env...), mark) {
				continue
			}
			syscall.Kill(pid, syscall.SIGSTOP)
			procs = append(procs, pid)
		}
	}
	for _, pid := range procs {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	serve.Wait()
}

// unmountUnder detaches every mount below dir.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}

// TestRedTeam33_DrillKill9RestoreRestart is the drill of docs/operations.md as an attack:
// serve is killed with -9 mid-run, the home's disk is lost (removed), `agora restore` brings
// it back from the bucket into the same path, serve restarts and finishes the run. Every task
// whose success was committed and replicated before the kill is still succeeded in the
// restored orch.db (nothing committed lost), the run succeeds, and no task ends with two
// finished dispatches or two succeeded attempts (none done twice in the record).
func TestRedTeam33_DrillKill9RestoreRestart(t *testing.T) {
	d := newDrillEnv(t)
	var b strings.Builder
	// Retries as in TestServe_Kill9: a dispatch in flight when serve is killed is lost (its
	// supervisor died), and its task runs again.
	b.WriteString("version: 1\nname: drill\nconcurrency: 3\ndefaults:\n  retry: {max_attempts: 5, initial_backoff: 50ms, max_backoff: 200ms}\ntasks:\n")
	const n = 24
	for i := range n {
		fmt.Fprintf(&b, "  - id: t%02d\n    subagent: worker\n    input: {n: %d}\n", i, i)
		if i >= 3 {
			fmt.Fprintf(&b, "    depends_on: [t%02d]\n", i-3)
		}
	}
	planPath := filepath.Join(t.TempDir(), "drill.yaml")
	must(t, os.WriteFile(planPath, []byte(b.String()), 0o644))

	serve := d.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	runID := strings.TrimSpace(strings.Split(d.run("orch", "submit", planPath), "\n")[0])
	orchDB := filepath.Join(d.home, "orch", "orch.db")

	// Mid-run: some tasks done, the run not over.
	var done map[string]bool
	deadline := time.Now().Add(3 * time.Minute)
	for {
		done = succeededTasks(t, orchDB, runID)
		if len(done) >= 6 {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(d.home, "..", "serve.log"))
			t.Fatalf("only %d tasks succeeded in 3 minutes:\n%s", len(done), b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t0 := time.Now()
	d.replicatedSince(t, t0)
	// The kill comes right after a checkpoint was anchored: the anchor must never be ahead of
	// the replica, or the restore that the anchor is there to check cannot succeed.
	anchors := d.srv.Client(t, d.locked)
	count := func() int {
		names, err := anchors.List(context.Background(), "anchors/")
		must(t, err)
		return len(names)
	}
	for n0, anchorDeadline := count(), time.Now().Add(2*time.Minute); count() == n0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(anchorDeadline) {
			t.Fatal("no new checkpoint anchored in 2 minutes")
		}
	}
	d.loseMachine(t, serve)
	if len(done) == n {
		t.Fatalf("the run ended before the kill: the drill proves nothing")
	}

	// The disk is lost; the operator restores into the same path. A killed supervisor leaves
	// its dispatch's disk (a tmpfs, as root) mounted: it goes with the disk.
	for rmDeadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		unmountUnder(t, d.home)
		err := os.RemoveAll(d.home)
		if err == nil {
			break
		}
		if time.Now().After(rmDeadline) {
			t.Fatalf("remove the home after the kill: %v", err)
		}
	}
	out, err := d.restore(d.home)
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	for _, s := range []string{d.srv.Creds.SecretAccessKey, d.srv.Creds.AccessKeyID} {
		if strings.Contains(out, s) {
			t.Errorf("restore printed a credential")
		}
	}
	restored := succeededTasks(t, orchDB, runID)
	for id := range done {
		if !restored[id] {
			t.Errorf("task %s succeeded and was replicated before the kill, but the restored orch.db has it not succeeded", id)
		}
	}

	serve = d.serve()
	run := waitRun(t, d.client(), runID, 4*time.Minute)
	if run.State != lifecycle.RunSucceeded {
		b, _ := os.ReadFile(filepath.Join(d.home, "..", "serve.log"))
		t.Fatalf("the restored run ended %s: %v\n%s", run.State, run.Counts, b)
	}
	serve.Process.Signal(syscall.SIGTERM)
	serve.Wait()

	// None twice: each task has one succeeded attempt in orch.db and one finished dispatch in
	// agora.db.
	odb, err := store.OpenReadOnly(context.Background(), orchDB)
	must(t, err)
	defer odb.Close()
	rows, err := odb.SQL().Query(`SELECT t.id, count(a.dispatch_id) FROM tasks t LEFT JOIN attempts a
		ON a.run_id = t.run_id AND a.task_idx = t.idx AND a.state = ? WHERE t.run_id = ? GROUP BY t.id`, lifecycle.TaskSucceeded, runID)
	must(t, err)
	tasks := 0
	for rows.Next() {
		var id string
		var k int
		must(t, rows.Scan(&id, &k))
		tasks++
		if k != 1 {
			t.Errorf("task %s has %d succeeded attempts, want 1", id, k)
		}
	}
	must(t, rows.Err())
	rows.Close()
	if tasks != n {
		t.Errorf("%d tasks in the restored run, want %d", tasks, n)
	}
	adb, err := store.OpenReadOnly(context.Background(), filepath.Join(d.home, "agora.db"))
	must(t, err)
	defer adb.Close()
	arows, err := adb.SQL().Query(`SELECT actor, count(*) FROM dispatches WHERE actor LIKE ? AND state = 'finished' GROUP BY actor`, "% via orch/"+runID+"/%")
	must(t, err)
	defer arows.Close()
	finished := 0
	for arows.Next() {
		var actor string
		var k int
		must(t, arows.Scan(&actor, &k))
		finished++
		if k != 1 {
			t.Errorf("%s has %d finished dispatches, want 1", actor, k)
		}
	}
	must(t, arows.Err())
	if finished != n {
		t.Errorf("%d tasks have a finished dispatch in agora.db, want %d", finished, n)
	}
	d.orchReplicaGone(t)
}

// orchReplicaGone: attack: the bucket loses orch.db's replica (a lifecycle rule, a hostile
// bucket owner deleting one prefix) while agora.db's stays. orch.db's log was anchored, so a
// restore must not bring back a home without it as if no orchestrator had ever served it.
func (d *drillEnv) orchReplicaGone(t *testing.T) {
	t.Helper()
	c := d.srv.Client(t, d.repl)
	names, err := c.List(context.Background(), "replica/orch/")
	must(t, err)
	if len(names) == 0 {
		t.Fatal("no orch.db replica to delete")
	}
	for _, n := range names {
		must(t, c.Delete(context.Background(), n, ""))
	}
	to := filepath.Join(t.TempDir(), "home")
	out, err := d.restore(to)
	if err == nil || !strings.Contains(out, "orch.db") {
		t.Fatalf("a bucket without orch.db's replica restored a home (err %v):\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(to, "agora.db")); err == nil {
		t.Error("the refused restore left agora.db in --to")
	}
}
