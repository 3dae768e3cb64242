package service_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/store"
)

// TestLeaderKill_JobNeverAheadOfReplica: a leader that replicates its home (replicate.s3 on
// versitygw, lag 200ms) fires a task on a kubernetes target and is killed (-9, with the
// task's supervisor) the moment the task's Job exists. orch.db and agora.db are shipped by
// two replicators on their own ticks, so without a rule the bucket could hold the fire
// (orch.db) and not the dispatch's gateway session (agora.db): the next leader, restored
// from the bucket, would start the task again under the same id, find the Job, fail to take
// back its session and fail the task (a run failed by a leader's death, with no retry:).
// A Start makes its pod only once both replicas hold the session: the home restored from
// the bucket here (`agora restore`, the databases; the rest as a takeover has it) adopts the
// dispatch (one dispatch.adopted), its pod's token opens the session at the new leader, and
// the run succeeds with the task once, under its first dispatch.
func TestLeaderKill_JobNeverAheadOfReplica(t *testing.T) {
	e, addr, backup, serve := replicatedLeader(t)
	runID, id := e.submitOne("lag")
	// The leader's pod dies the moment the Job exists: serve and the task's supervisor.
	sup := e.supervisorPID(id)
	must(t, serve.Process.Signal(syscall.SIGKILL))
	must(t, syscall.Kill(sup, syscall.SIGKILL))
	serve.Wait()
	t.Logf("old leader: task d fired as dispatch %s, Job made, leader killed", id)

	restoreFromBucket(t, e, backup)
	serve = e.serveArgs("--gateway", addr)
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	var state, reason, detail string
	var sessions int
	// The restored databases may already show the dispatch started with its session (the
	// replica held the start): the new leader's adoption, recorded as it takes the dispatch
	// over, is what is waited for then, not the state it inherits.
	agoratest.WaitFor(t, time.Minute, "the new leader to adopt or end the dispatch", func() bool {
		db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
		if err != nil {
			return false
		}
		defer db.Close()
		if db.SQL().QueryRow(`SELECT state, reason, detail FROM dispatches WHERE id = ?`, id).Scan(&state, &reason, &detail) != nil {
			return false
		}
		db.SQL().QueryRow(`SELECT count(*) FROM gateway_sessions WHERE dispatch_id = ?`, id).Scan(&sessions)
		if state == "failed" || state == "finished" || state == "cancelled" {
			return true
		}
		return state == "started" && sessions == 1 && len(e.adoptions()[id]) > 0
	})
	if state != "started" || sessions != 1 {
		t.Fatalf("the new leader did not adopt the task in flight: dispatch %s is %s/%s (%d sessions): %s", id, state, reason, sessions, detail)
	}
	// Adopted as started (the replica held the start: serve's adoption) or as accepted (it
	// held the accept and the session: the new supervisor's Start found the Job, at_start).
	if a := e.adoptions()[id]; len(a) != 1 {
		t.Errorf("dispatch.adopted entries of %s: %v; want one", id, a)
	} else {
		t.Logf("adopted: %v", a[0])
	}

	// The Job that stands uploads its result to the new leader with its own token.
	jobs := e.jobs()
	if len(jobs[id]) != 1 {
		t.Fatalf("jobs of %s: %v; want one", id, jobs[id])
	}
	e.podAt(addr, id, e.podToken(jobs[id][0]), "the new leader").uploadOK()
	e.openGate()
	run := waitRun(t, e.client(), runID, 3*time.Minute)
	if tk := run.Tasks[0]; run.State != "succeeded" || tk.Attempts != 1 || tk.DispatchID != id {
		t.Errorf("run %s; task d %s after %d attempts (dispatch %s); want succeeded once, as %s", run.State, tk.State, tk.Attempts, tk.DispatchID, id)
	}
	// The run's bundle, the adoption in it, verifies offline.
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	e.run("orch", "audit", runID, "--out", bundle)
	vc := exec.Command(agoraBin, "verify", bundle, "--key", filepath.Join(e.home, "keys", "audit.pub"))
	vc.Env = append(os.Environ(), "AGORA_HOME=/nonexistent")
	if b, err := vc.CombinedOutput(); err != nil {
		t.Errorf("verify the run's bundle: %v\n%s", err, b)
	}
}

// TestLeaderKill_UploadKeptAcrossTheKill (ADR 0009): the worker uploads its result to the
// leader and is answered; the leader dies (-9, with the task's supervisor) before the pod
// ends, so before any supervisor recorded the dispatch's end. The upload was answered only
// once its bytes were in the blob store and agora.db's replica held the row naming them, so
// the next leader, restored from the bucket, puts it in its own out directory when it takes
// the session back: when the pod ends, the dispatch finishes with the result the dead leader
// received, and the run succeeds once, with no retry and no upload after the kill.
func TestLeaderKill_UploadKeptAcrossTheKill(t *testing.T) {
	e, addr, backup, serve := replicatedLeader(t)
	runID, id := e.submitOne("kept")
	e.waitStarted(id)
	jobs := e.jobs()
	e.podAt(addr, id, e.podToken(jobs[id][0]), "the leader").uploadOK()
	// Answered: the worker would exit now. The leader's pod dies before the pod ends.
	sup := e.supervisorPID(id)
	must(t, serve.Process.Signal(syscall.SIGKILL))
	must(t, syscall.Kill(sup, syscall.SIGKILL))
	serve.Wait()

	restoreFromBucket(t, e, backup)
	serve = e.serveArgs("--gateway", addr)
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	e.openGate()
	run := waitRun(t, e.client(), runID, 3*time.Minute)
	if tk := run.Tasks[0]; run.State != "succeeded" || tk.Attempts != 1 || tk.DispatchID != id {
		state, reason := e.dispatchState(id)
		t.Fatalf("run %s; task d %s after %d attempts (dispatch %s, %s/%s); want succeeded once, as %s, with the result the dead leader kept",
			run.State, tk.State, tk.Attempts, tk.DispatchID, state, reason, id)
	}
	if a := e.adoptions()[id]; len(a) != 1 {
		t.Errorf("dispatch.adopted entries of %s: %v; want one", id, a)
	}
	if state, reason := e.dispatchState(id); state != "finished" {
		t.Errorf("dispatch %s ended %s/%s; want finished", id, state, reason)
	}
}

// replicatedLeader starts a kubernetes env's serve that replicates its home to versitygw
// (lag 200ms) and has its gateway on addr, once both databases replicate; backup holds
// what a replica is deployed with (agora.yaml, keys, the bucket's credentials).
func replicatedLeader(t *testing.T) (e *k8sEnv, addr, backup string, serve *exec.Cmd) {
	t.Helper()
	e = newK8sEnv(t)
	srv, err := s3test.Start()
	if err != nil {
		if strings.HasPrefix(err.Error(), "SKIP") {
			t.Skip(err.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	repl := srv.Bucket(t, false)
	backup = t.TempDir()
	creds := filepath.Join(backup, "s3.env")
	must(t, os.WriteFile(creds, []byte("AWS_ACCESS_KEY_ID="+srv.Creds.AccessKeyID+"\nAWS_SECRET_ACCESS_KEY="+srv.Creds.SecretAccessKey+"\n"), 0o600))
	addr = agoratest.FreeAddr(t)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, "egress: {allow_private: [127.0.0.1/32]}\ngateway: {listen: %q, advertise: \"https://%s\"}\nreplicate:\n  s3: {endpoint: %q, bucket: %s, prefix: %s, credentials_file: %s}\n  lag: 200ms\n",
		addr, addr, repl.Endpoint, repl.Bucket, repl.Prefix, creds)
	must(t, err)
	must(t, f.Close())
	cfg, err := os.ReadFile(filepath.Join(e.home, "agora.yaml"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(backup, "agora.yaml"), cfg, 0o600))
	must(t, os.CopyFS(filepath.Join(backup, "keys"), os.DirFS(filepath.Join(e.home, "keys"))))

	serve = e.serveArgs("--gateway", addr)
	// Both databases replicating (their status files published): a Start waits for them.
	if !agoratest.Poll(time.Minute, func() bool {
		for _, db := range []string{"agora", "orch"} {
			if _, err := os.Stat(filepath.Join(e.home, db+"-replicate.json")); err != nil {
				return false
			}
		}
		return true
	}) {
		b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
		t.Fatalf("serve does not replicate both databases after a minute:\n%s", b)
	}
	return e, addr, backup, serve
}

// restoreFromBucket makes e's home what the next leader has after a takeover: the databases
// as `agora restore` gets them from the bucket, the rest as takeOver has it.
func restoreFromBucket(t *testing.T, e *k8sEnv, backup string) {
	t.Helper()
	// What the bucket holds now is what the next leader restores.
	restored := filepath.Join(t.TempDir(), "restored")
	cmd := exec.Command(agoraBin, "restore", "--to", restored, "--config", filepath.Join(backup, "agora.yaml"), "--keys", filepath.Join(backup, "keys"))
	cmd.Env = append(os.Environ(), "HOME="+backup)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agora restore: %v\n%s", err, out)
	}
	takeOver(t, e.home)
	for _, db := range []string{"agora.db", filepath.Join("orch", "orch.db")} {
		for _, suffix := range []string{"-wal", "-shm"} {
			os.Remove(filepath.Join(e.home, db+suffix))
		}
		b, err := os.ReadFile(filepath.Join(restored, db))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(e.home, db), b, 0o600))
	}

}

// submitOne submits plan name, one task d on the kubernetes target with no retry, and returns
// its run and the dispatch of its Job, once the Job exists.
func (e *k8sEnv) submitOne(name string) (runID, id string) {
	t := e.t
	t.Helper()
	planPath := filepath.Join(t.TempDir(), name+".yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: "+name+"\ndefaults: {target: k8s}\ntasks:\n  - {id: d, subagent: worker, retry: {max_attempts: 1}}\n"), 0o644))
	runID = strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	for d := range e.waitJobs(1) {
		id = d
	}
	return runID, id
}
