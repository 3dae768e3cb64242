package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/store"
)

// k8sEnv is an env whose agora.yaml has target "k8s" on a kwok control plane. Its pods carry
// a node selector no node matches until the test opens the gate (labels the node): until
// then every Job's pod stays Pending, so a test decides when work proceeds.
type k8sEnv struct {
	*env
	c *k8stest.Cluster
}

const k8sGateLabel = "agora-e2e-gate"

func newK8sEnv(t *testing.T) *k8sEnv {
	t.Helper()
	// The package's one kwok control plane, in a namespace of this test's own; the gate
	// starts closed and is closed again when the test ends (the node is every test's).
	c := k8stest.Shared(t, k8stest.Options{}).InNewNamespace(t)
	e := &k8sEnv{env: newEnv(t), c: c}
	e.setGate(nil)
	t.Cleanup(func() { e.setGate(nil) })
	pin := "@sha256:" + strings.Repeat("ab", 32)
	cfg := fmt.Sprintf(`targets:
  k8s:
    provider: kubernetes
    kubeconfig: %s
    namespace: %s
    image: registry.example/agents/toolchain%s
    worker_image: registry.example/agora/worker%s
    gateway: https://10.250.0.1:8443
    node_selector: {%s: open}
`, c.Kubeconfig, c.Namespace, pin, pin, k8sGateLabel)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString(cfg)
	must(t, err)
	must(t, f.Close())
	return e
}

// openGate labels kwok's node so the target's pods schedule, run and complete.
func (e *k8sEnv) openGate() { e.setGate("open") }

// setGate sets the node's gate label to value, or removes it (nil).
func (e *k8sEnv) setGate(value any) {
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]any{k8sGateLabel: value}}}
	must(e.t, e.c.Do(context.Background(), http.MethodPatch, "/api/v1/nodes/"+k8stest.KwokNode, patch, nil))
}

// jobs lists the namespace's Jobs by agora's dispatch label.
func (e *k8sEnv) jobs() map[string][]string {
	var l struct {
		Items []struct {
			Metadata struct {
				Name   string
				Labels map[string]string
			}
		}
	}
	must(e.t, e.c.Do(e.t.Context(), http.MethodGet, "/apis/batch/v1/namespaces/"+e.c.Namespace+"/jobs?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dagora", nil, &l))
	out := map[string][]string{}
	for _, j := range l.Items {
		id := j.Metadata.Labels["agora.dispatch"]
		out[id] = append(out[id], j.Metadata.Name)
	}
	return out
}

// waitJobs waits until n dispatches have Jobs.
func (e *k8sEnv) waitJobs(n int) map[string][]string {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if j := e.jobs(); len(j) >= n {
			return j
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
			e.t.Fatalf("no Job for %d dispatches after 2m; serve log:\n%s", n, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *k8sEnv) dispatchState(id string) (state, reason string) {
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(e.t, err)
	defer db.Close()
	must(e.t, db.SQL().QueryRow(`SELECT state, reason FROM dispatches WHERE id = ?`, id).Scan(&state, &reason))
	return state, reason
}

// dispatchDetail is dispatch id's detail in agora.db.
func (e *k8sEnv) dispatchDetail(id string) (detail string) {
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(e.t, err)
	defer db.Close()
	must(e.t, db.SQL().QueryRow(`SELECT detail FROM dispatches WHERE id = ?`, id).Scan(&detail))
	return detail
}

// TestServe_Kill9KubernetesTarget: `agora orch serve` runs a plan's task as a Job on kwok and
// is killed with SIGKILL while the Job's pod is pending. Restarted, it carries the task to its
// end with that one Job. A second task's Job is deleted while serve is dead: that attempt ends
// failed/lost and the plan's retry policy runs a second attempt, on a Job of its own. Between
// the steps `agora dispatch describe` shows the pod's phase and node, and a line saying a
// deleted Job is gone.
func TestServe_Kill9KubernetesTarget(t *testing.T) {
	e := newK8sEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	planPath := filepath.Join(t.TempDir(), "k8s.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: k8s
defaults: {target: k8s}
tasks:
  - id: kept
    subagent: worker
    retry: {max_attempts: 1}
  - id: vanishing
    subagent: worker
    retry: {max_attempts: 2, initial_backoff: 10ms}
`), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	first := e.waitJobs(2)

	var kept, vanishing string
	c := e.client()
	run, err := c.Status(context.Background(), runID)
	must(t, err)
	for _, task := range run.Tasks {
		switch task.ID {
		case "kept":
			kept = task.DispatchID
		case "vanishing":
			vanishing = task.DispatchID
		}
	}
	if len(first[kept]) != 1 || len(first[vanishing]) != 1 {
		t.Fatalf("jobs by dispatch %v; want one each for %s and %s", first, kept, vanishing)
	}
	// The Job exists before kwok's job controller makes its pod: describe shows the pod's
	// phase once there is one (at load 20 the first look found none).
	pending := "placement: kubernetes " + first[kept][0] + ": phase Pending"
	var out string
	agoratest.Poll(30*time.Second, func() bool {
		out = e.run("dispatch", "describe", kept)
		return strings.Contains(out, pending)
	})
	t.Logf("before the kill: %s", lastLine(out))
	if !strings.Contains(out, pending) {
		t.Errorf("describe of a pending dispatch, 30 s after its Job was made:\n%s", out)
	}

	must(t, serve.Process.Signal(syscall.SIGKILL))
	serve.Wait()
	// While serve is dead, someone deletes the second task's Job.
	must(t, e.c.Do(t.Context(), http.MethodDelete, "/apis/batch/v1/namespaces/"+e.c.Namespace+"/jobs/"+first[vanishing][0]+"?propagationPolicy=Background", nil, nil))
	serve = e.serve()
	e.openGate()

	run = waitRun(t, c, runID, 3*time.Minute)
	jobs := e.jobs()
	if len(jobs[kept]) != 1 || jobs[kept][0] != first[kept][0] {
		t.Errorf("jobs of the kept dispatch after the restart: %v; want only %s", jobs[kept], first[kept][0])
	}
	if len(jobs[vanishing]) != 0 {
		t.Errorf("the deleted Job came back: %v", jobs[vanishing])
	}
	if state, reason := e.dispatchState(vanishing); state != "failed" || reason != "lost" {
		t.Errorf("the dispatch whose Job was deleted ended %s/%s, want failed/lost", state, reason)
	}
	var second string
	for _, task := range run.Tasks {
		if task.ID == "vanishing" {
			second = task.DispatchID
			if task.Attempts != 2 {
				t.Errorf("task vanishing ran %d attempts, want 2 (retried after lost)", task.Attempts)
			}
		}
	}
	if second == vanishing || len(jobs[second]) != 1 {
		t.Errorf("the retry's dispatch %s has Jobs %v; want one of its own", second, jobs[second])
	}
	// kwok runs no process: the pod "completes" with exit 0 and uploads no result, so the
	// dispatch's terminal state is the one a worker that exits 0 without a result gets.
	keptState, keptReason := e.dispatchState(kept)
	t.Logf("run %s; kept ended %s/%s", run.State, keptState, keptReason)
	if !lifecycle.RunEnded(run.State) || keptState != "failed" || keptReason != "worker-failed" {
		t.Errorf("the kept dispatch ended %s/%s (run %s); want failed/worker-failed, its pod's end", keptState, keptReason, run.State)
	}

	out = e.run("dispatch", "describe", kept)
	t.Logf("after the run: %s", lastLine(out))
	if !strings.Contains(out, "node "+k8stest.KwokNode) {
		t.Errorf("describe after the pod ran names no node:\n%s", out)
	}
	var js struct {
		Placement struct{ Phase, Node, Object string }
	}
	must(t, json.Unmarshal([]byte(e.run("dispatch", "describe", kept, "-o", "json")), &js))
	if js.Placement.Node != k8stest.KwokNode || js.Placement.Phase == "" || js.Placement.Object != first[kept][0] {
		t.Errorf("describe -o json placement = %+v", js.Placement)
	}
	out = e.run("dispatch", "describe", vanishing)
	t.Logf("deleted Job: %s", lastLine(out))
	if !strings.Contains(out, "is gone") {
		t.Errorf("describe of the dispatch whose Job was deleted:\n%s", out)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// supervisorPID is the pid of the process recorded as supervising dispatch id.
func (e *k8sEnv) supervisorPID(id string) int {
	e.t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(e.t, err)
	defer db.Close()
	var supervisor string
	must(e.t, db.SQL().QueryRow(`SELECT supervisor FROM dispatches WHERE id = ?`, id).Scan(&supervisor))
	pid, _, _ := strings.Cut(supervisor, ":")
	var n int
	if _, err := fmt.Sscanf(pid, "%d", &n); err != nil || n <= 1 {
		e.t.Fatalf("supervisor %q", supervisor)
	}
	return n
}

// waitStarted waits until dispatch id is recorded started: its supervisor holds its session.
func (e *k8sEnv) waitStarted(id string) {
	e.t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if state, _ := e.dispatchState(id); state == "started" {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("dispatch %s is not started a minute after its Job exists", id)
		}
	}
}

// adoptions are the dispatch.adopted entries of the audit log, by dispatch.
func (e *k8sEnv) adoptions() map[string][]map[string]any {
	var entries []struct {
		Kind, Subject string
		Details       map[string]any
	}
	must(e.t, json.Unmarshal([]byte(e.run("audit", "log", "-o", "json", "--kind", "dispatch.adopted")), &entries))
	out := map[string][]map[string]any{}
	for _, en := range entries {
		out[strings.TrimPrefix(en.Subject, "dispatch/")] = append(out[strings.TrimPrefix(en.Subject, "dispatch/")], en.Details)
	}
	return out
}

// TestServe_Kill9KubernetesAdopts is "every task once" on kwok: serve's pod dies with
// a task's Job in flight (serve and its detached supervisor, killed with -9, as a pod's
// processes die together) and serve starts again on the same home. The new serve adopts the
// dispatch (dispatch.adopted, in the audit before it follows the Job), follows the same Job
// to its end (never a second Job), and the task ends once: one attempt, one dispatch, its
// state the pod's. The pod's gateway session is kept while it runs (its token still opens
// the session) and closed at the end. A second task, whose Job is deleted while serve is
// down, cannot be adopted: it ends failed/lost with its session revoked, and the plan's retry runs it again on a Job of its own. The run's bundle
// verifies. (Both tasks retry a lost attempt; kwok's pod, which runs nothing, ends
// worker-failed, which kept does not retry: a second attempt of kept is a run twice.)
func TestServe_Kill9KubernetesAdopts(t *testing.T) {
	e := newK8sEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	planPath := filepath.Join(t.TempDir(), "adopt.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: adopt
defaults: {target: k8s}
tasks:
  - id: kept
    subagent: worker
    retry: {max_attempts: 2, initial_backoff: 10ms, on_worker_failed: false}
  - id: vanishing
    subagent: worker
    retry: {max_attempts: 2, initial_backoff: 10ms}
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
	kept, vanishing := ids["kept"], ids["vanishing"]
	e.waitStarted(kept)
	e.waitStarted(vanishing)
	session := func(id string) string { return filepath.Join(e.home, "gateway", "sessions", id, "session.json") }
	before, err := os.ReadFile(session(kept))
	must(t, err)

	// The pod dies: serve and the supervisors it started, all at once.
	sups := []int{e.supervisorPID(kept), e.supervisorPID(vanishing)}
	must(t, serve.Process.Signal(syscall.SIGKILL))
	for _, pid := range sups {
		must(t, syscall.Kill(pid, syscall.SIGKILL))
	}
	serve.Wait()
	for _, pid := range sups {
		agoratest.WaitDead(t, pid) // dead before the reap below looks at them, even under load
	}
	must(t, e.c.Do(t.Context(), http.MethodDelete, "/apis/batch/v1/namespaces/"+e.c.Namespace+"/jobs/"+first[vanishing][0]+"?propagationPolicy=Background", nil, nil))
	// A one-shot command reaping meanwhile leaves the orphan live for a serve to adopt.
	e.run("dispatch", "list")
	if state, _ := e.dispatchState(kept); state != "started" {
		t.Fatalf("a one-shot reap ended the orphaned dispatch: %s", state)
	}
	if out := e.run("dispatch", "describe", kept); !strings.Contains(out, "waiting for agora orch serve to adopt it") {
		t.Errorf("describe of an orphan with no serve running does not say it waits for one:\n%s", out)
	}
	serve = e.serve()
	if !agoratest.Poll(time.Minute, func() bool { return len(e.adoptions()[kept]) > 0 }) {
		b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
		t.Fatalf("serve did not adopt %s within a minute; serve log:\n%s", kept, b)
	}
	// Adopted, not re-exported: the pod's token is the one its session still checks.
	if after, err := os.ReadFile(session(kept)); err != nil || string(after) != string(before) {
		t.Errorf("the adopted dispatch's session changed (%v):\nbefore %s\nafter  %s", err, before, after)
	}
	e.openGate()

	run = waitRun(t, c, runID, 3*time.Minute)
	jobs := e.jobs()
	if len(jobs[kept]) != 1 || jobs[kept][0] != first[kept][0] {
		t.Errorf("jobs of the adopted dispatch: %v; want only %s", jobs[kept], first[kept][0])
	}
	for _, task := range run.Tasks {
		switch task.ID {
		case "kept":
			if task.Attempts != 1 || task.DispatchID != kept {
				t.Errorf("task kept ran %d attempts (dispatch %s); want once, as %s", task.Attempts, task.DispatchID, kept)
			}
		case "vanishing":
			if task.Attempts != 2 || task.DispatchID == vanishing {
				t.Errorf("task vanishing ran %d attempts (dispatch %s); want 2, retried after lost", task.Attempts, task.DispatchID)
			}
		}
	}
	// kwok runs no process: the pod completes with exit 0 and uploads no result.
	if state, reason := e.dispatchState(kept); state != "failed" || reason != "worker-failed" {
		t.Errorf("the adopted dispatch ended %s/%s; want failed/worker-failed, its pod's end", state, reason)
	}
	if state, reason := e.dispatchState(vanishing); state != "failed" || reason != "lost" {
		t.Errorf("the dispatch whose Job was deleted ended %s/%s; want failed/lost", state, reason)
	}
	for _, id := range []string{kept, vanishing} {
		if _, err := os.Stat(session(id)); !os.IsNotExist(err) {
			t.Errorf("dispatch %s's gateway session is still there after its end (%v)", id, err)
		}
	}
	adopted := e.adoptions()
	if a := adopted[kept]; len(a) != 1 || a[0]["role"] != "serve" || a[0]["previous"] == a[0]["supervisor"] ||
		!strings.HasPrefix(fmt.Sprint(a[0]["supervisor"]), fmt.Sprintf("%d:", serve.Process.Pid)) {
		t.Errorf("dispatch.adopted of %s: %v; want one, by the new serve (pid %d)", kept, a, serve.Process.Pid)
	}
	t.Logf("adopted: %v", adopted[kept])

	e.run("orch", "seal", runID)
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	e.run("orch", "audit", runID, "--out", bundle)
	cmd := exec.Command(agoraBin, "verify", bundle, "--key", filepath.Join(e.home, "keys", "audit.pub"))
	cmd.Env = append(os.Environ(), "AGORA_HOME=/nonexistent")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("verify the run's bundle: %v\n%s", err, b)
	}
}

// TestServe_ReapAdoptsDeadSupervisorsDispatch: a kubernetes dispatch's supervisor killed with
// -9 while serve runs is adopted by serve, which keeps the pod's gateway session (a dead
// supervisor's session must not outlive it: the adopter holds it) and closes it when the Job ends. The adopting serve killed with -9 in
// turn, the next serve adopts the dispatch from it; the Job is followed to its end once.
func TestServe_ReapAdoptsDeadSupervisorsDispatch(t *testing.T) {
	e := newK8sEnv(t)
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	planPath := filepath.Join(t.TempDir(), "reap.yaml")
	must(t, os.WriteFile(planPath, []byte("version: 1\nname: reap\ndefaults: {target: k8s}\ntasks:\n  - {id: orphaned, subagent: worker}\n"), 0o644))
	runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", planPath), "\n")[0])
	jobs := e.waitJobs(1)
	var id string
	for d := range jobs {
		id = d
	}
	e.waitStarted(id)
	session := filepath.Join(e.home, "gateway", "sessions", id, "session.json")
	if _, err := os.Stat(session); err != nil {
		t.Fatalf("the dispatch has no gateway session while its Job runs: %v", err)
	}
	must(t, syscall.Kill(e.supervisorPID(id), syscall.SIGKILL))
	if !agoratest.Poll(time.Minute, func() bool { return len(e.adoptions()[id]) > 0 }) {
		t.Fatal("serve did not adopt the dispatch whose supervisor was killed")
	}
	if pid := e.supervisorPID(id); pid != serve.Process.Pid {
		t.Errorf("the dispatch's supervisor is pid %d after the adoption, want serve's %d", pid, serve.Process.Pid)
	}
	if _, err := os.Stat(session); err != nil {
		t.Errorf("the adopted dispatch's session is gone while its pod runs: %v", err)
	}
	// The adopter is killed with -9 too: the next serve adopts the dispatch from it.
	first := serve.Process.Pid
	must(t, serve.Process.Signal(syscall.SIGKILL))
	serve.Wait()
	serve = e.serve()
	if !agoratest.Poll(time.Minute, func() bool { return len(e.adoptions()[id]) >= 2 }) {
		t.Fatal("the restarted serve did not adopt the dispatch its killed predecessor had adopted")
	}
	if a := e.adoptions()[id]; !strings.HasPrefix(fmt.Sprint(a[1]["previous"]), fmt.Sprintf("%d:", first)) {
		t.Errorf("second adoption %v: want it taken from the killed serve (pid %d)", a[1], first)
	}
	e.openGate()
	waitRun(t, e.client(), runID, 2*time.Minute)
	if state, reason := e.dispatchState(id); state != "failed" || reason != "worker-failed" {
		t.Errorf("the adopted dispatch ended %s/%s, want failed/worker-failed (its pod's end)", state, reason)
	}
	if _, err := os.Stat(session); !os.IsNotExist(err) {
		t.Errorf("the adopted dispatch's gateway session is still there after its end (%v)", err)
	}
	if j := e.jobs()[id]; len(j) != 1 {
		t.Errorf("jobs of the adopted dispatch: %v, want its one", j)
	}
}
