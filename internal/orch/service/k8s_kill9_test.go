package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/orch/api"
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
	c := k8stest.Start(t, k8stest.Options{Namespace: "agents"})
	e := &k8sEnv{env: newEnv(t), c: c}
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
func (e *k8sEnv) openGate() {
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]string{k8sGateLabel: "open"}}}
	must(e.t, e.c.Do(e.t.Context(), http.MethodPatch, "/api/v1/nodes/"+k8stest.KwokNode, patch, nil))
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
	// phase once there is one (at load 20 the first look found none; CI of session 37).
	pending := "placement: kubernetes " + first[kept][0] + ": phase Pending"
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if out = e.run("dispatch", "describe", kept); strings.Contains(out, pending) || time.Now().After(deadline) {
			break
		}
	}
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
	if !api.RunTerminal(run.State) || keptState != "failed" || keptReason != "worker-failed" {
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

// TestServe_ReapRevokesDeadSupervisorsSession is the red team's finding F (session 3): a
// dispatch's supervisor killed with -9 leaves its gateway session behind, and the pod, which
// outlives it, keeps a token that still opens the dispatch's routes (its mounts, its upload
// into the stage). The reap that records the dispatch lost must revoke the session too.
func TestServe_ReapRevokesDeadSupervisorsSession(t *testing.T) {
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
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if state, _ := e.dispatchState(id); state == "started" {
			break // its supervisor is recorded, and holds the session
		}
		if time.Now().After(deadline) {
			t.Fatal("the dispatch is not started a minute after its Job exists")
		}
	}
	session := filepath.Join(e.home, "gateway", "sessions", id, "session.json")
	if _, err := os.Stat(session); err != nil {
		t.Fatalf("the dispatch has no gateway session while its Job runs: %v", err)
	}
	db, err := store.Open(context.Background(), filepath.Join(e.home, "agora.db"), agoradb.Migrations())
	must(t, err)
	var supervisor string
	err = db.SQL().QueryRow(`SELECT supervisor FROM dispatches WHERE id = ?`, id).Scan(&supervisor)
	db.Close()
	must(t, err)
	pid, _, _ := strings.Cut(supervisor, ":")
	var n int
	if _, err := fmt.Sscanf(pid, "%d", &n); err != nil || n <= 1 {
		t.Fatalf("supervisor %q", supervisor)
	}
	must(t, syscall.Kill(n, syscall.SIGKILL))

	waitRun(t, e.client(), runID, 2*time.Minute)
	if state, reason := e.dispatchState(id); state != "failed" || reason != "lost" {
		t.Errorf("the dispatch whose supervisor was killed ended %s/%s, want failed/lost", state, reason)
	}
	if _, err := os.Stat(session); !os.IsNotExist(err) {
		t.Errorf("the dead supervisor's gateway session is still there after the reap (%v): its pod's token still works", err)
	}
}
