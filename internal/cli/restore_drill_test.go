package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/compute/local"
)

// drillRun is what the drill reads of `agora orch status -o json`.
type drillRun struct {
	State string `json:"state"`
	Tasks []struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Attempts int    `json:"attempts"`
	} `json:"tasks"`
}

// drill is the lost-disk drill's world: the built agora, a temporary directory with the
// operator's backup (agora.yaml, keys/, the S3 credentials) and the homes.
type drill struct {
	t      *testing.T
	bin    string
	dir    string
	backup string
	srv    *s3test.Server
}

func (d *drill) cmd(env map[string]string, args ...string) *exec.Cmd {
	c := exec.Command(d.bin, args...)
	c.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		c.Env = append(c.Env, k+"="+v)
	}
	return c
}

func (d *drill) must(env map[string]string, args ...string) string {
	d.t.Helper()
	out, err := d.cmd(env, args...).CombinedOutput()
	if err != nil {
		d.t.Fatalf("agora %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (d *drill) serve(env map[string]string) *exec.Cmd {
	s := d.cmd(env, "orch", "serve")
	startServing(d.t, s)
	return s
}

// waitEnded waits (a bound, not a timing assertion) until run id has ended, and returns it;
// log is serve's, for the failure.
func (d *drill) waitEnded(env map[string]string, id string, bound time.Duration, log func() string) drillRun {
	d.t.Helper()
	var r drillRun
	agoratest.Eventually(d.t, bound, "run "+id+" to end", func() error {
		if r = d.status(env, id); r.State != "succeeded" && r.State != "failed" {
			return fmt.Errorf("%+v\n%s", r, log())
		}
		return nil
	})
	return r
}

// waitTask waits until task of run id is in state; log is serve's, for the failure.
func (d *drill) waitTask(env map[string]string, id, task, state string, log func() string) {
	d.t.Helper()
	agoratest.Eventually(d.t, time.Minute, "task "+task+" "+state, func() error {
		if st, _ := d.status(env, id).task(task); st != state {
			return fmt.Errorf("it is %q\n%s", st, log())
		}
		return nil
	})
}

func (d *drill) status(env map[string]string, id string) drillRun {
	var r drillRun
	out, err := d.cmd(env, "orch", "status", id, "-o", "json").Output()
	if err == nil {
		json.Unmarshal(out, &r)
	}
	return r
}

func (r drillRun) task(id string) (string, int) {
	for _, x := range r.Tasks {
		if x.ID == id {
			return x.State, x.Attempts
		}
	}
	return "", 0
}

// setUp makes the old home with replicate.s3 (lag 200ms) and blobs.s3, the subagents and the
// operator's backup of agora.yaml and keys/, and returns the plan's path.
func (d *drill) setUp(env map[string]string) string {
	t := d.t
	bucket := d.srv.Bucket(t, false)
	os.MkdirAll(d.backup, 0o700)
	creds := filepath.Join(d.backup, "s3.env")
	writeFiles(t, map[string]string{creds: "AWS_ACCESS_KEY_ID=" + d.srv.Creds.AccessKeyID + "\nAWS_SECRET_ACCESS_KEY=" + d.srv.Creds.SecretAccessKey + "\n"})
	os.Chmod(creds, 0o600)
	loc := fmt.Sprintf("{endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}", bucket.Endpoint, bucket.Bucket, bucket.Prefix, creds)
	yaml := "egress: {allow_private: [127.0.0.1/32]}\nblobs:\n  s3: " + loc + "\nreplicate:\n  s3: " + loc + "\n  lag: 200ms\n"
	home := env["AGORA_HOME"]
	capDir := filepath.Join(d.dir, "caps", "shell")
	writeFiles(t, map[string]string{filepath.Join(capDir, "capability.yaml"): "commands: [\"sh -c *\"]\n"})
	d.must(env, "init")
	writeFiles(t, map[string]string{filepath.Join(home, "agora.yaml"): yaml, filepath.Join(d.backup, "agora.yaml"): yaml})
	d.must(env, "capability", "register", "shell", "--from", capDir)
	d.must(env, "subagent", "register", "quick", "--runtime", "exec", "--command", "sh -c 'echo done'", "--capability", "shell")
	d.must(env, "subagent", "register", "slow", "--runtime", "exec", "--command", "sh -c 'echo working; sleep 4'", "--capability", "shell")
	if err := os.CopyFS(filepath.Join(d.backup, "keys"), os.DirFS(filepath.Join(home, "keys"))); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(d.dir, "plan.yaml")
	writeFiles(t, map[string]string{plan: "version: 1\nname: drill\ndefaults: {retry: {max_attempts: 3, initial_backoff: 1s}}\ntasks:\n" +
		"  - {id: a, subagent: quick}\n  - {id: b, subagent: quick, depends_on: [a]}\n" +
		"  - {id: c, subagent: slow, depends_on: [b]}\n  - {id: d, subagent: quick, depends_on: [c]}\n"})
	return plan
}

// loseDiskMidRun starts serve, submits the plan, waits until c runs and both databases were
// replicated from a snapshot read after that (so b's success is in the bucket), then kills
// serve (SIGKILL: the machine is gone, replication stops with it) and deletes the home. It
// returns the run's id and the killed serve.
func (d *drill) loseDiskMidRun(env map[string]string, plan string) (string, *exec.Cmd) {
	t := d.t
	s1 := d.serve(env)
	t.Cleanup(func() { s1.Process.Kill(); s1.Wait() }) // a failure below leaves no serve
	out, err := d.cmd(env, "orch", "submit", plan).Output()
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, s1.Stderr)
	}
	id := strings.TrimSpace(string(out))
	serveLog := func() string { return fmt.Sprint(s1.Stderr) }
	d.waitTask(env, id, "c", "running", serveLog)
	home := env["AGORA_HOME"]
	waitReplicated(t, home, time.Now(), serveLog)
	s1.Process.Signal(syscall.SIGKILL)
	s1.Wait()
	// Replication ran in serve, so nothing written after this instant reaches the bucket. c's
	// detached supervisor still finishes on the doomed disk (as root it mounted the dispatch's
	// disk there); the home goes once it has unmounted it.
	agoratest.Eventually(t, time.Minute, "the lost home to go", func() error { return os.RemoveAll(home) })
	return id, s1
}

// TestRestore_Drill: the lost-disk drill with the real binary. `agora orch serve` runs
// with replicate.s3 (lag 200ms) and blobs.s3; a run of four tasks in a chain is submitted;
// once a and b have succeeded (and a lag has passed), serve is killed (SIGKILL: the machine is
// gone: replication stops with it) and the home deleted. `agora restore` brings the home back into a new directory, serve
// starts there and finishes the run: a and b are not run again (one attempt each: nothing
// committed was lost), c, in flight when the disk went, runs again, and d once.
func TestRestore_Drill(t *testing.T) {
	if err := local.Available(); err != nil {
		t.Skipf("SKIP: bubblewrap sandbox not available here: %v", err)
	}
	dir := t.TempDir()
	d := &drill{t: t, bin: builtAgora(t), dir: dir, backup: filepath.Join(dir, "backup"), srv: s3test.Shared(t)}
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "old"), "HOME": dir, "USER": "tester"}
	plan := d.setUp(env)
	id, s1 := d.loseDiskMidRun(env, plan)

	newHome := filepath.Join(dir, "new")
	env2 := map[string]string{"AGORA_HOME": newHome, "HOME": dir, "USER": "tester"}
	out := d.must(env2, "restore", "--to", newHome, "--config", filepath.Join(d.backup, "agora.yaml"), "--keys", filepath.Join(d.backup, "keys"))
	if !strings.Contains(out, "agora.db: generation") || !strings.Contains(out, "orch.db: generation") {
		t.Fatalf("restore:\n%s", out)
	}
	r := d.status(env2, id)
	for _, x := range []string{"a", "b"} {
		if st, n := r.task(x); st != "succeeded" || n != 1 {
			t.Fatalf("the restored run lost committed work: task %s %s after %d attempts: %+v", x, st, n, r)
		}
	}
	s2 := d.serve(env2)
	stopped := false
	stop2 := func() {
		if !stopped {
			stopped = true
			s2.Process.Signal(syscall.SIGTERM)
			s2.Wait()
		}
	}
	defer stop2()
	r = d.waitEnded(env2, id, 90*time.Second, func() string { return fmt.Sprint(s2.Stderr) })
	if r.State != "succeeded" {
		t.Fatalf("the run did not finish after the restore: %+v\n%s", r, s2.Stderr)
	}
	for x, want := range map[string]int{"a": 1, "b": 1, "d": 1} {
		if _, n := r.task(x); n != want {
			t.Errorf("task %s ran %d times, want %d: %+v", x, n, want, r)
		}
	}
	if _, n := r.task("c"); n < 1 || n > 2 {
		t.Errorf("task c (in flight at the loss) ran %d times, want 1 or 2", n)
	}
	if r := runAgora(t, env2, "doctor"); !strings.Contains(r.stdout, "replication orch.db\tok\tgeneration ") {
		t.Errorf("doctor shows no replication row:\n%s", r.stdout)
	}
	t.Logf("after the restore: %+v", r)
	// Attack: the credentials never reach serve's log, whatever replication said there.
	stop2()
	for i, s := range []*exec.Cmd{s1, s2} {
		log := s.Stderr.(*agoratest.SyncBuffer).String()
		if !strings.Contains(log, "replicating") {
			t.Errorf("serve %d did not log its replication:\n%s", i+1, log)
		}
		for _, secret := range []string{d.srv.Creds.AccessKeyID, d.srv.Creds.SecretAccessKey} {
			if strings.Contains(log, secret) {
				t.Errorf("serve %d logged a credential", i+1)
			}
		}
	}
}
