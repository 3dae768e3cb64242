package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/store"
)

// testLease is the lease duration of the tests' replicas. A leader renews every fifth of it,
// gives each renew (its Get and its Update, and a standby each try to take over) that fifth,
// and gives up after two thirds of it without one. With 3 s that is 600 ms a try and 2 s
// without a renew: a loaded machine (the apiserver and the -race agora both short of CPU)
// stalls that long, and then the leader stops mid-test and its standby takes over unbidden.
// 10 s, the default, gives each try 2 s and a leader 6.7 s. Nothing the tests prove (a standby
// never serves, a takeover restores, a fenced leader stops writing) needs a short lease; it
// costs each takeover by SIGSTOP or SIGKILL the 7 s more that the standby waits out.
const testLease = 10 * time.Second

// leaderYAML is agora.yaml's leader: for identity id on w's Lease.
func (w *leaseWorld) leaderYAML(id string) string {
	return fmt.Sprintf("leader: {lease: %s, namespace: %s, kubeconfig: %s, identity: %s, duration: %s}\n",
		w.lease, w.cluster.Namespace, w.cluster.Kubeconfig, id, testLease)
}

// leaseWorld is two replicas' homes on one Lease of a real control plane.
type leaseWorld struct {
	t       *testing.T
	bin     string
	dir     string
	cluster *k8stest.Cluster
	lease   string
}

// replica is one `agora orch serve` process of the world, its stderr in a file.
type replica struct {
	env    map[string]string
	cmd    *exec.Cmd
	stderr string
	done   chan error
}

func (w *leaseWorld) cmd(env map[string]string, args ...string) *exec.Cmd {
	c := exec.Command(w.bin, args...)
	c.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		c.Env = append(c.Env, k+"="+v)
	}
	return c
}

func (w *leaseWorld) must(env map[string]string, args ...string) string {
	w.t.Helper()
	out, err := w.cmd(env, args...).CombinedOutput()
	if err != nil {
		w.t.Fatalf("agora %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// home makes a home for identity id with leader: on the world's Lease and extra agora.yaml.
func (w *leaseWorld) home(id, extra string) map[string]string {
	env := map[string]string{"AGORA_HOME": filepath.Join(w.dir, id), "HOME": w.dir, "USER": "tester"}
	w.must(env, "init")
	writeFiles(w.t, map[string]string{filepath.Join(env["AGORA_HOME"], "agora.yaml"): w.leaderYAML(id) + extra})
	return env
}

func (w *leaseWorld) serve(env map[string]string) *replica { return w.serveArgs(env) }

// serveArgs is serve with more flags of `agora orch serve`.
func (w *leaseWorld) serveArgs(env map[string]string, args ...string) *replica {
	r := &replica{env: env, stderr: filepath.Join(env["AGORA_HOME"], "serve.stderr"), done: make(chan error, 1)}
	f, err := os.Create(r.stderr)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	r.cmd = w.cmd(env, append([]string{"orch", "serve"}, args...)...)
	r.cmd.Stderr = f
	if err := r.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	w.t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGCONT)
		r.cmd.Process.Kill()
		<-r.done
	})
	return r
}

func (r *replica) log() string {
	b, _ := os.ReadFile(r.stderr)
	return string(b)
}

// waitLog waits for s in r's stderr; the bound only stops a broken build from hanging.
func (w *leaseWorld) waitLog(r *replica, s string) time.Time {
	w.t.Helper()
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(r.log(), s) {
			return time.Now()
		}
		select {
		case err := <-r.done:
			r.done <- err
			w.t.Fatalf("serve of %s exited (%v) before saying %q:\n%s", r.env["AGORA_HOME"], err, s, r.log())
		default:
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("serve of %s never said %q:\n%s", r.env["AGORA_HOME"], s, r.log())
		}
	}
}

// fingerprint is what a home's databases hold: every row of every table of agora.db and
// orch.db, read through SQLite (the bytes of the files change without a commit: closing the
// last connection checkpoints the WAL into the database). A database that does not exist (a
// standby's home has no orch.db) has no entry.
func fingerprint(t *testing.T, home string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	for _, p := range []string{"agora.db", "orch/orch.db"} {
		if _, err := os.Stat(filepath.Join(home, p)); os.IsNotExist(err) {
			continue
		}
		db, err := store.OpenReadOnly(t.Context(), filepath.Join(home, p))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		rows, err := db.SQL().Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		for rows.Next() {
			var n string
			rows.Scan(&n)
			tables = append(tables, n)
		}
		rows.Close()
		for _, table := range tables {
			rows, err := db.SQL().Query(`SELECT * FROM "` + table + `"`)
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(h, "%s%q\n", table, vals)
			}
			rows.Close()
		}
		db.Close()
		out[p] = [32]byte(h.Sum(nil))
	}
	return out
}

// TestLeaderLease_FencedAfterTakeover with the real binary on a real control plane and
// versitygw: replica a leads (replicating to a bucket), b waits as a standby. a is SIGSTOPped
// past the lease duration; b takes over and records leader.acquired naming a. A submission is
// queued on a's socket while it sleeps, then a is woken: it must commit nothing (its agora.db
// and orch.db byte for byte, and the bucket, unchanged), the submission fails, and a exits
// non-zero saying it lost the lease. b, stopped by SIGTERM, records leader.released.
func TestLeaderLease_FencedAfterTakeover(t *testing.T) {
	srv := s3test.Shared(t)
	c := k8stest.Shared(t, k8stest.Options{}).InNewNamespace(t) // the package's one control plane; its leases are named apart
	dir := t.TempDir()
	w := &leaseWorld{t: t, bin: builtAgora(t), dir: dir, cluster: c, lease: fmt.Sprintf("agora-%d", os.Getpid())}
	bucket := srv.Bucket(t, false)
	creds := filepath.Join(dir, "s3.env")
	writeFiles(t, map[string]string{creds: "AWS_ACCESS_KEY_ID=" + srv.Creds.AccessKeyID + "\nAWS_SECRET_ACCESS_KEY=" + srv.Creds.SecretAccessKey + "\n"})
	os.Chmod(creds, 0o600)
	repl := fmt.Sprintf("egress: {allow_private: [127.0.0.1/32]}\nreplicate:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n  lag: 200ms\n", bucket.Endpoint, bucket.Bucket, bucket.Prefix, creds)
	envA := w.home("a", repl)
	envB := w.home("b", "")
	capDir := filepath.Join(dir, "caps", "shell")
	writeFiles(t, map[string]string{filepath.Join(capDir, "capability.yaml"): "commands: [\"sh -c *\"]\n"})
	w.must(envA, "capability", "register", "shell", "--from", capDir)
	w.must(envA, "subagent", "register", "quick", "--runtime", "exec", "--command", "sh -c 'echo done'", "--capability", "shell")
	plan := filepath.Join(dir, "plan.yaml")
	writeFiles(t, map[string]string{plan: "version: 1\nname: late\ntasks:\n  - {id: a, subagent: quick}\n"})

	a := w.serve(envA)
	w.waitLog(a, "orchestrator serving on")
	b := w.serve(envB)
	w.waitLog(b, "standby: waiting for the leader lease")
	// a's replica is current: both databases shipped from snapshots read after a served, so
	// the bucket holds a's state as of now (a has nothing more to ship).
	waitReplicated(t, envA["AGORA_HOME"], time.Now(), a.log)
	objs := func() []string {
		names, err := srv.Client(t, bucket).List(t.Context(), "replica/")
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	stopped := time.Now()
	a.cmd.Process.Signal(syscall.SIGSTOP)
	took := w.waitLog(b, "leader: holding lease")
	t.Logf("takeover: b leads %s after a was stopped (lease duration %s)", took.Sub(stopped).Round(time.Millisecond), testLease)
	before, bucketBefore := fingerprint(t, envA["AGORA_HOME"]), objs()
	submit := w.cmd(envA, "orch", "submit", plan)
	var submitOut bytes.Buffer
	submit.Stdout, submit.Stderr = &submitOut, &submitOut
	if err := submit.Start(); err != nil {
		t.Fatal(err)
	}
	// The request waits in a's socket: a connection there that stopped a has not accepted.
	agoratest.WaitFor(t, time.Minute, "the submission to wait in a's socket", func() bool { return pendingConnection(t, a.cmd.Process.Pid) })
	a.cmd.Process.Signal(syscall.SIGCONT)
	err := <-a.done
	a.done <- err
	if err == nil {
		t.Fatalf("the old leader exited 0 after losing the lease:\n%s", a.log())
	}
	if !strings.Contains(a.log(), "lost the leader lease") {
		t.Errorf("the old leader's exit does not say it lost the lease:\n%s", a.log())
	}
	if err := submit.Wait(); err == nil {
		t.Errorf("a submission to the fenced leader succeeded:\n%s", submitOut.String())
	}
	if after := fingerprint(t, envA["AGORA_HOME"]); !mapsEqual(before, after) {
		t.Errorf("the old leader's databases changed after it woke:\nbefore %x\nafter  %x\n%s", before, after, a.log())
	}
	if after := objs(); !slices.Equal(bucketBefore, after) {
		t.Errorf("the old leader uploaded after it woke: %d objects, then %d", len(bucketBefore), len(after))
	}
	out := w.must(envB, "audit", "log", "--kind", "leader.*")
	if !strings.Contains(out, "leader.acquired") || !strings.Contains(out, "lease/"+c.Namespace+"/"+w.lease) {
		t.Errorf("b's audit log has no leader.acquired of the lease:\n%s", out)
	}
	// A leader still opening its databases when it is stopped says it was interrupted (exit
	// 130): this checks the graceful stop of a serving leader, so b serves first.
	w.waitLog(b, "orchestrator serving on")
	b.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-b.done; err != nil {
		t.Errorf("b stopped by SIGTERM: %v\n%s", err, b.log())
	}
	b.done <- nil
	var entries []struct {
		Kind    string         `json:"kind"`
		Details map[string]any `json:"details"`
	}
	out = w.must(envB, "audit", "log", "--kind", "leader.*", "-o", "json")
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Kind != "leader.acquired" || entries[0].Details["previous"] != "a" || entries[0].Details["identity"] != "b" ||
		entries[1].Kind != "leader.released" {
		t.Errorf("b's leader entries: want leader.acquired by b with previous a, then leader.released:\n%s", out)
	}
}

func mapsEqual(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
