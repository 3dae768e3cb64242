package service_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/orch/api"
)

// realPodEnv is an env whose target "k8s" runs on a real node (a kubelet over containerd),
// authenticated as the ServiceAccount bound to the documented Role, with `agora orch serve
// --gateway` serving the network gateway on the node's IP. Pods carry a node selector the node
// lacks until the test opens the gate, so the test decides when they start.
type realPodEnv struct {
	*env
	c       *k8stest.Cluster
	gateway string // HOST:PORT serve's gateway listens on
}

func newRealPodEnv(t *testing.T) *realPodEnv {
	t.Helper()
	toolchain := k8stest.ToolchainImage(t)
	c := k8stest.Start(t, k8stest.Options{RealNode: true})
	ctx := t.Context()
	workerRef, err := c.ImportAgoraWorker(ctx, agoratest.Worker(agoraBin))
	must(t, err)
	toolRef, err := c.ImportPodmanImage(ctx, toolchain)
	must(t, err)
	role, err := os.ReadFile("../../../examples/kubernetes/rbac.yaml")
	must(t, err)
	must(t, c.ApplyYAML(ctx, role))
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, "agora")
	must(t, err)

	e := &realPodEnv{env: newEnv(t), c: c}
	// serve binds it after a restart too: below the ephemeral range, where no port 0 or
	// outgoing connection takes it meanwhile.
	port, err := agoratest.FreePort(k8stest.RealNodeIP)
	must(t, err)
	e.gateway = net.JoinHostPort(k8stest.RealNodeIP, port)
	// A subagent whose agent is still at work when serve is killed, and ends while it is dead.
	cat := filepath.Join(t.TempDir(), "catalog")
	must(t, os.MkdirAll(filepath.Join(cat, "caps", "shell"), 0o755))
	must(t, os.WriteFile(filepath.Join(cat, "caps", "shell", "capability.yaml"), []byte("description: a shell\ncommands: [\"sh -c *\"]\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "slow.yaml"), []byte(`description: works a while, then writes
runtime: exec
command: [sh, -c, 'echo started; sleep 6; echo "$AGORA_INPUT_JSON" > slow.json; echo finished']
capabilities: [shell]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte(`version: 1
capabilities:
  - {name: shell, from: caps/shell}
subagents:
  - {name: slow, from: slow.yaml}
`), 0o644))
	e.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	cfg := fmt.Sprintf(`gateway:
  listen: %[1]s
  advertise: https://%[1]s
targets:
  k8s:
    provider: kubernetes
    kubeconfig: %[2]s
    namespace: %[3]s
    image: %[4]s
    worker_image: %[5]s
    gateway: https://%[1]s
    node_selector: {%[6]s: open}
`, e.gateway, kubeconfig, c.Namespace, toolRef, workerRef, k8sGateLabel)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString(cfg)
	must(t, err)
	must(t, f.Close())
	return e
}

// serveGateway starts `agora orch serve --gateway` (the documented setup) and waits until
// both its socket and its gateway answer.
func (e *realPodEnv) serveGateway() *exec.Cmd {
	e.t.Helper()
	cmd := e.serveArgs("--gateway", e.gateway)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", e.gateway)
		if err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("serve's gateway does not listen on %s after 30s", e.gateway)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openGate labels the real node so the target's pods schedule.
func (e *realPodEnv) openGate() {
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]string{k8sGateLabel: "open"}}}
	must(e.t, e.c.Do(e.t.Context(), http.MethodPatch, "/api/v1/nodes/"+k8stest.RealNodeName, patch, nil))
}

// submit runs plan tasks of subagent n times over, with the default retry policy (one
// attempt), and waits until each has its Job.
func (e *realPodEnv) submit(name, subagent string, n int) (runID string, dispatches []string) {
	e.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nname: %s\ndefaults: {target: k8s}\ntasks:\n", name)
	for i := range n {
		fmt.Fprintf(&b, "  - {id: t%d, subagent: %s, input: {n: %d}}\n", i, subagent, i)
	}
	path := filepath.Join(e.t.TempDir(), name+".yaml")
	must(e.t, os.WriteFile(path, []byte(b.String()), 0o644))
	runID = strings.TrimSpace(strings.Split(e.run("orch", "submit", path), "\n")[0])
	if !agoratest.Poll(2*time.Minute, func() bool {
		run, err := e.client().Status(context.Background(), runID)
		must(e.t, err)
		dispatches = dispatches[:0]
		for _, task := range run.Tasks {
			if task.DispatchID != "" {
				dispatches = append(dispatches, task.DispatchID)
			}
		}
		return len(dispatches) == n && e.jobCount(dispatches) == n
	}) {
		b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
		e.t.Fatalf("run %s: %d dispatches with Jobs after 2m; serve log:\n%s", runID, len(dispatches), b)
	}
	return runID, dispatches
}

func (e *realPodEnv) jobCount(ids []string) int {
	n := 0
	for _, id := range ids {
		var l struct{ Items []any }
		if e.c.Do(e.t.Context(), http.MethodGet, "/apis/batch/v1/namespaces/"+e.c.Namespace+"/jobs?labelSelector=agora.dispatch%3D"+id, nil, &l) == nil {
			n += len(l.Items)
		}
	}
	return n
}

// podLog is container ctr's log of dispatch id's pod ("" while it has none).
func (e *realPodEnv) podLog(id, ctr string) string {
	var pods struct {
		Items []struct{ Metadata struct{ Name string } }
	}
	if e.c.Do(e.t.Context(), http.MethodGet, "/api/v1/namespaces/"+e.c.Namespace+"/pods?labelSelector=agora.dispatch%3D"+id, nil, &pods) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range pods.Items {
		var log []byte
		if e.c.Do(e.t.Context(), http.MethodGet, "/api/v1/namespaces/"+e.c.Namespace+"/pods/"+p.Metadata.Name+"/log?container="+ctr, nil, &log) == nil {
			b.Write(log)
		}
	}
	return b.String()
}

// waitLogs waits until container ctr of every dispatch's pod has logged want.
func (e *realPodEnv) waitLogs(ids []string, ctr, want string) {
	e.t.Helper()
	missing := 0
	if !agoratest.Poll(2*time.Minute, func() bool {
		missing = 0
		for _, id := range ids {
			if !strings.Contains(e.podLog(id, ctr), want) {
				missing++
			}
		}
		return missing == 0
	}) {
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "--- %s %s:\n%s\n", id, ctr, e.podLog(id, ctr))
		}
		e.t.Fatalf("%d of %d pods' %s containers have not logged %q after 2m:\n%s", missing, len(ids), ctr, want, b.String())
	}
}

// waitFetchStarted waits until the init container (the fetch step) of every dispatch's pod
// has started.
func (e *realPodEnv) waitFetchStarted(ids []string) {
	e.t.Helper()
	started := 0
	if !agoratest.Poll(2*time.Minute, func() bool {
		started = 0
		for _, id := range ids {
			var pods struct {
				Items []struct {
					Status struct {
						InitContainerStatuses []struct {
							State struct{ Running, Terminated *struct{} }
						}
					}
				}
			}
			if e.c.Do(e.t.Context(), http.MethodGet, "/api/v1/namespaces/"+e.c.Namespace+"/pods?labelSelector=agora.dispatch%3D"+id, nil, &pods) != nil {
				continue
			}
			for _, p := range pods.Items {
				if st := p.Status.InitContainerStatuses; len(st) > 0 && (st[0].State.Running != nil || st[0].State.Terminated != nil) {
					started++
					break
				}
			}
		}
		return started == len(ids)
	}) {
		e.t.Fatalf("%d of %d pods' fetch steps started after 2m", started, len(ids))
	}
}

// checkFirstAttempts: every task of the run finished on its first attempt, as its agent did.
func (e *realPodEnv) checkFirstAttempts(run api.Run, product string) {
	e.t.Helper()
	if run.State != "succeeded" {
		e.t.Errorf("run %s ended %s, want succeeded", run.ID, run.State)
	}
	for _, task := range run.Tasks {
		if task.State != "succeeded" || task.Attempts != 1 {
			e.t.Errorf("task %s: %s after %d attempts (%s: %s); want succeeded on the first", task.ID, task.State, task.Attempts, task.Reason, task.Detail)
			continue
		}
		if state, reason := (&k8sEnv{env: e.env}).dispatchState(task.DispatchID); state != "finished" {
			e.t.Errorf("task %s's dispatch %s ended %s/%s, want finished", task.ID, task.DispatchID, state, reason)
		}
		if patch := e.run("dispatch", "patch", task.DispatchID); !strings.Contains(patch, product) {
			e.t.Errorf("task %s's patch lacks %s:\n%s", task.ID, product, patch)
		}
	}
}

// TestServe_Kill9RealPods, on a real kubelet: `agora orch serve
// --gateway`, the documented setup, is killed with SIGKILL twice while its tasks' pods
// need its gateway, first while they fetch (their init containers start while it is dead,
// and it stays dead 6 s more), then while they upload (their agents end while it is dead, and
// it stays dead until every worker has found the gateway not answering its upload). Every task then ends as its agent did, on its first attempt (the
// default retry policy), each pod's log says the gateway did not answer and then answered
// again, and what the agents wrote while serve was dead is in their dispatches' logs. The provider authenticates as the documented Role's
// ServiceAccount throughout. (kwok pods never call the gateway: TestServe_Kill9KubernetesTarget
// cannot see this.)
func TestServe_Kill9RealPods(t *testing.T) {
	e := newRealPodEnv(t)
	serve := e.serveGateway()
	defer func() { serve.Process.Kill(); serve.Wait() }()
	const pods = 4

	t.Run("while-they-fetch", func(t *testing.T) {
		e.t = t
		runID, ids := e.submit("fetch", "worker", pods)
		must(t, serve.Process.Signal(syscall.SIGKILL))
		serve.Wait()
		e.openGate() // the pods start with serve, and its gateway, dead
		e.waitFetchStarted(ids)
		// Dead 6 s more, longer than a fetch step tried before it failed (3.4 s), as a
		// restart can take: the outage's length is what is tested, and nothing marks a
		// point 3.4 s into a pod's retries.
		time.Sleep(6 * time.Second)
		serve = e.serveGateway()
		run := waitRun(t, e.client(), runID, 4*time.Minute)
		e.checkFirstAttempts(run, "task.json")
		for _, id := range ids {
			log := e.podLog(id, "fetch")
			for _, want := range []string{"the gateway does not answer GET session", "the gateway answers GET session again"} {
				if !strings.Contains(log, want) {
					t.Errorf("dispatch %s's fetch log lacks %q:\n%s", id, want, log)
				}
			}
		}
	})

	t.Run("while-they-upload", func(t *testing.T) {
		e.t = t
		runID, ids := e.submit("upload", "slow", pods)
		e.waitLogs(ids, "worker", "started")
		must(t, serve.Process.Signal(syscall.SIGKILL))
		serve.Wait()
		e.waitLogs(ids, "worker", "finished")                                   // every agent ended while serve was dead
		e.waitLogs(ids, "worker", "the gateway does not answer PUT mounts/out") // and its worker tried to upload
		serve = e.serveGateway()
		run := waitRun(t, e.client(), runID, 4*time.Minute)
		e.checkFirstAttempts(run, "slow.json")
		for _, id := range ids {
			log := e.podLog(id, "worker")
			for _, want := range []string{"the gateway does not answer PUT mounts/out", "the gateway answers PUT mounts/out again"} {
				if !strings.Contains(log, want) {
					t.Errorf("dispatch %s's worker log lacks %q:\n%s", id, want, log)
				}
			}
			if out := e.run("dispatch", "logs", id); !strings.Contains(out, "finished") {
				t.Errorf("dispatch %s's output lacks what the agent wrote while serve was dead:\n%s", id, out)
			}
		}
	})
}
