package service_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	cremote "github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// takeOver is what a standby that took the Lease has after its restore: a home at the same
// path (AGORA_HOME is /var/lib/agora/home on every replica) holding the old leader's
// databases, keys (the chart's shared Secret, the gateway's CA among them), agora.yaml and
// blobs (blobs.s3, shared), and nothing of the old leader's volume: no stage, no gateway
// session directory. The databases are copied whole, the old leader being dead (kill -9): what
// its replica in the bucket holds, less the last second, which real restores test
// (TestRealNodeLeaderKill). The old home is moved aside, never used again.
func takeOver(t *testing.T, home string) {
	t.Helper()
	old := home + ".old-leader"
	// A root agora's stages have a disk quota mounted, and the pinned content's tmpfs, which
	// the dead leader's supervisors left: its volume is gone, mounts and all.
	unmountStages(home)
	must(t, os.Rename(home, old))
	restoreFrom(t, old, home)
}

// unmountStages unmounts what a root agora's stages under home have mounted (the disk
// quotas and the pinned content's tmpfs), as a pod's death takes its mounts.
func unmountStages(home string) {
	for _, dir := range []string{"disk", "pinned"} {
		mounts, _ := filepath.Glob(filepath.Join(home, "dispatches", "*", dir))
		for _, m := range mounts {
			unix.Unmount(m, unix.MNT_DETACH)
		}
	}
}

// restoreFrom copies into home what a replica restores from another leader's home (from):
// the databases, keys, agora.yaml and blobs, and nothing of its volume (no stage, no gateway
// session directory, no socket, lock or -shm).
func restoreFrom(t *testing.T, from, home string) {
	t.Helper()
	must(t, filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		switch {
		case rel == "dispatches" || rel == "gateway":
			return filepath.SkipDir // the other leader's volume
		case d.Type()&fs.ModeSocket != 0, strings.HasSuffix(rel, ".lock"), strings.HasSuffix(rel, "-shm"):
			return nil
		}
		dst := filepath.Join(home, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(dst, fi.Mode().Perm())
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, fi.Mode().Perm())
	}))
}

// TestServe_TakeoverAdoptsKubernetesJob is a takeover at kwok level: the leader's serve
// dies (-9, with its supervisors) while two tasks' Jobs are in flight; a standby with the
// restored databases and none of the old leader's volume serves. It adopts both dispatches
// (dispatch.adopted) from agora.db alone: the gateway sessions the Jobs hold are there (their
// token hashes), so the pods' tokens open them on the new leader's gateway, whose stages are
// made again from the same dispatches and served to fetch again (a pod killed mid-fetch
// fetches there). The pod of "kept" uploads its result to the new leader after the takeover: it
// finishes once, one Job, one attempt. The pod of "gone" uploads nothing here (as a worker
// that uploaded to the old leader before it died): its dispatch ends lost, never a failure of
// the agent's, and the plan runs it again. Each gateway session ends with its dispatch.
func TestServe_TakeoverAdoptsKubernetesJob(t *testing.T) {
	e := newK8sEnv(t)
	addr := e.gateway()
	serve := e.serve()
	planPath := filepath.Join(t.TempDir(), "takeover.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: takeover
defaults: {target: k8s}
tasks:
  - id: kept
    subagent: worker
    retry: {max_attempts: 2, initial_backoff: 10ms}
  - id: gone
    subagent: worker
    retry: {max_attempts: 2, initial_backoff: 10ms, on_worker_failed: false}
`), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	first := e.waitJobs(2)
	c := e.client()
	run, err := c.Status(context.Background(), runID)
	must(t, err)
	ids := map[string]string{}
	for _, task := range run.Tasks {
		ids[task.ID] = task.DispatchID
	}
	kept, gone := ids["kept"], ids["gone"]
	e.waitStarted(kept)
	e.waitStarted(gone)
	token := e.podToken(first[kept][0])

	// The leader's pod dies: serve and its supervisors at once.
	sups := []int{e.supervisorPID(kept), e.supervisorPID(gone)}
	must(t, serve.Process.Signal(syscall.SIGKILL))
	for _, pid := range sups {
		must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	serve.Wait()
	for _, pid := range sups {
		agoratest.WaitDead(t, pid)
	}
	takeOver(t, e.home)
	serve = e.serveArgs("--gateway", addr)
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	if !agoratest.Poll(time.Minute, func() bool { a := e.adoptions(); return len(a[kept]) > 0 && len(a[gone]) > 0 }) {
		b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
		t.Fatalf("the new leader did not adopt both dispatches within a minute; serve log:\n%s", b)
	}

	// kept's pod, with the token its Secret holds, reaches the new leader's gateway: its
	// session is taken back from agora.db, and its upload lands in the new stage.
	p := e.podAt(addr, kept, token, "the new leader")
	refetched := false
	for _, m := range p.info.Mounts {
		if m.Fetch && m.Name == "bundle" {
			// A pod killed with its leader while it fetched fetches again from the new
			// leader, which made the stage again from the same dispatch.
			dir := filepath.Join(t.TempDir(), "bundle")
			must(t, p.wc.Fetch(p.ctx, m, dir))
			b, err := os.ReadFile(filepath.Join(dir, wire.ManifestFile))
			if err != nil || !strings.Contains(string(b), kept) {
				t.Errorf("the bundle fetched from the new leader: manifest %q %v, want the dispatch's", b, err)
			}
			refetched = true
		}
	}
	if !refetched {
		t.Fatalf("the taken-back session has no bundle to fetch again: %+v", p.info.Mounts)
	}
	p.uploadOK()
	e.openGate()

	run = waitRun(t, c, runID, 3*time.Minute)
	jobs := e.jobs()
	if len(jobs[kept]) != 1 || jobs[kept][0] != first[kept][0] {
		t.Errorf("jobs of kept: %v; want only %s", jobs[kept], first[kept][0])
	}
	for _, task := range run.Tasks {
		switch task.ID {
		case "kept":
			if task.Attempts != 1 || task.DispatchID != kept || task.State != "succeeded" {
				t.Errorf("task kept: %s after %d attempts (dispatch %s); want succeeded once, as %s", task.State, task.Attempts, task.DispatchID, kept)
			}
		case "gone":
			if task.Attempts != 2 || task.DispatchID == gone {
				t.Errorf("task gone ran %d attempts (dispatch %s); want 2, retried after lost", task.Attempts, task.DispatchID)
			}
		}
	}
	if state, reason := e.dispatchState(kept); state != "finished" {
		t.Errorf("kept's dispatch ended %s/%s; want finished (its result uploaded to the new leader)", state, reason)
	}
	if state, reason := e.dispatchState(gone); state != "failed" || reason != "lost" {
		t.Errorf("gone's dispatch ended %s/%s; want failed/lost (its result is not on this replica)", state, reason)
	}
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	defer db.Close()
	var left int
	must(t, db.SQL().QueryRow(`SELECT count(*) FROM gateway_sessions WHERE dispatch_id IN (?, ?)`, kept, gone).Scan(&left))
	if left != 0 {
		t.Errorf("%d gateway sessions of the ended dispatches are still stored", left)
	}
	// The session is closed: the pod's token opens nothing now, and is told so (401, no retry).
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/v1/dispatches/"+kept+"/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	ca, err := os.ReadFile(filepath.Join(e.home, "keys", "gateway-ca.pem"))
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token of an ended dispatch at the new leader: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
}

// podToken is the gateway token of the Job called name, from its Secret (as the pod gets it).
func (e *k8sEnv) podToken(name string) string {
	e.t.Helper()
	var s struct{ Data map[string]string }
	must(e.t, e.c.Do(e.t.Context(), http.MethodGet, "/api/v1/namespaces/"+e.c.Namespace+"/secrets/"+name, nil, &s))
	b, err := base64.StdEncoding.DecodeString(s.Data["token"])
	must(e.t, err)
	return string(b)
}

// pod is a kubernetes dispatch's worker as the tests play it after a takeover: a gateway
// client with the pod's token, trusting the home's gateway CA, and the session it read.
type pod struct {
	t    *testing.T
	ctx  context.Context
	wc   *remote.Client
	info *cremote.Info
}

// podAt opens dispatch id's session at the gateway on addr with token, as its worker does;
// asking is what fails the test when the session does not open, naming where (at).
func (e *k8sEnv) podAt(addr, id, token, at string) *pod {
	t := e.t
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(e.home, "keys", "gateway-ca.pem"))
	must(t, err)
	wc, err := remote.NewClient("https://"+addr, id, token, ca)
	must(t, err)
	t.Cleanup(wc.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	info, err := wc.Info(ctx)
	if err != nil {
		t.Fatalf("the pod's token at %s: %v", at, err)
	}
	return &pod{t: t, ctx: ctx, wc: wc, info: info}
}

// uploadOK uploads an ok result.json into every result mount, as the worker does at its end;
// it fails the test when the session has none.
func (p *pod) uploadOK() {
	p.t.Helper()
	out := p.t.TempDir()
	res, err := wire.Result{Version: wire.ResultVersion, Status: wire.StatusOK}.Marshal()
	must(p.t, err)
	must(p.t, os.WriteFile(filepath.Join(out, wire.ResultFile), res, 0o644))
	uploaded := false
	for _, m := range p.info.Mounts {
		if m.Result {
			must(p.t, p.wc.Upload(p.ctx, m, out))
			uploaded = true
		}
	}
	if !uploaded {
		p.t.Fatalf("the session has no result mount: %+v", p.info.Mounts)
	}
}

// TestServe_TakeoverWithoutTheRepository: the new leader cannot make an adopted dispatch's
// stage again (its repository is on the old leader's volume only: the docs ask for a clone on
// every replica, and this one has none). The adoption goes on: a pod that fetched its stage
// before the takeover uploads its result and the task succeeds once; what was not made is not
// offered to fetch (410), never a part of it.
func TestServe_TakeoverWithoutTheRepository(t *testing.T) {
	e := newK8sEnv(t)
	addr := e.gateway()
	repo := filepath.Join(t.TempDir(), "repo")
	must(t, os.Mkdir(repo, 0o755))
	gitIn(t, repo, "init", "-q", "-b", "main")
	must(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("app\n"), 0o644))
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "base")
	serve := e.serveArgs("--gateway", addr)
	planPath := filepath.Join(t.TempDir(), "norepo.yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: norepo\ndefaults: {target: k8s}\ntasks:\n  - {id: d, subagent: worker, retry: {max_attempts: 1}}\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath, "--repo", repo), "\n")[0])
	var id string
	for d := range e.waitJobs(1) {
		id = d
	}
	e.waitStarted(id)
	token := e.podToken(e.jobs()[id][0])

	sup := e.supervisorPID(id)
	must(t, serve.Process.Signal(syscall.SIGKILL))
	must(t, syscall.Kill(sup, syscall.SIGKILL))
	serve.Wait()
	takeOver(t, e.home)
	must(t, os.Rename(repo, repo+".on-the-old-leader")) // not on this replica
	serve = e.serveArgs("--gateway", addr)
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	if !agoratest.Poll(time.Minute, func() bool { return len(e.adoptions()[id]) > 0 }) {
		b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
		t.Fatalf("the new leader did not adopt the dispatch within a minute; serve log:\n%s", b)
	}
	p := e.podAt(addr, id, token, "the new leader")
	offered := false
	for _, m := range p.info.Mounts {
		if m.Fetch && m.Name == "workspace" {
			offered = true
			err := p.wc.Fetch(p.ctx, m, filepath.Join(t.TempDir(), "ws"))
			if err == nil || !strings.Contains(err.Error(), "410") {
				t.Errorf("fetching the workspace the new leader could not make again: %v, want 410", err)
			}
		}
	}
	if !offered {
		t.Errorf("the taken-back session no longer lists the workspace to fetch (the init step would skip it): %+v", p.info.Mounts)
	}
	p.uploadOK()
	e.openGate()
	run := waitRun(t, e.client(), runID, 3*time.Minute)
	if tk := run.Tasks[0]; run.State != "succeeded" || tk.Attempts != 1 || tk.DispatchID != id {
		state, reason := e.dispatchState(id)
		t.Errorf("run %s; task d %s after %d attempts (dispatch %s, %s/%s); want succeeded once, as %s", run.State, tk.State, tk.Attempts, tk.DispatchID, state, reason, id)
	}
}

// gateway gives e's agora.yaml a network gateway on a free loopback port, the address its
// pods reach it at, and returns that address.
func (e *k8sEnv) gateway() string {
	t := e.t
	t.Helper()
	addr := agoratest.FreeAddr(t)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = fmt.Fprintf(f, "gateway: {listen: %q, advertise: \"https://%s\"}\n", addr, addr)
	must(t, err)
	must(t, f.Close())
	return addr
}
