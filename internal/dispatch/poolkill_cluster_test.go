package dispatch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/runtimebin"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
	"github.com/agora-dev/agora/internal/workerbin"
)

// The processes of TestHelperPoolSupervisor (their role in pid1Role): a detached supervisor of
// the home that accepts and supervises one dispatch on target "pool", and a second supervisor
// host (serve) racing the test's own to adopt it.
const (
	poolSupervisorRole = "pool-supervisor"
	poolAdopterRole    = "pool-adopter"
	poolKillHomeEnv    = "AGORA_TEST_POOLKILL_HOME"
	poolKillWorkerEnv  = "AGORA_TEST_POOLKILL_WORKER"
	poolKillCAEnv      = "AGORA_TEST_POOLKILL_CA"
	poolKillDirEnv     = "AGORA_TEST_POOLKILL_DIR" // the supervisor writes "id" there; the adopter waits for "go"
	poolKillIDEnv      = "AGORA_TEST_POOLKILL_ID"
)

// poolKillProviders builds each kubernetes target's provider as every process of the home
// builds it (the pool's name hashes the provider's settings, so the supervisor, the holder and
// the adopters must agree): the gateway's CA, the home's session registry.
func poolKillProviders(homeDir string, ca []byte) func(context.Context, string, config.Target) (compute.Provider, error) {
	var mu sync.Mutex
	built := map[string]compute.Provider{}
	return func(_ context.Context, name string, tg config.Target) (compute.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p := built[name]; p != nil {
			return p, nil
		}
		kp, err := kubernetes.New(kubernetes.Options{Kubeconfig: tg.Kubeconfig, Namespace: tg.Namespace,
			Image: tg.Image, WorkerImage: tg.WorkerImage, GatewayURL: tg.Gateway, GatewayCA: ca,
			Exporter: &netgw.Registry{Dir: filepath.Join(homeDir, "gateway", "sessions")}, Target: name, Backend: tg.Backend,
			BindPod: (&netgw.Slots{Dir: filepath.Join(homeDir, "gateway", "slots")}).BindPod})
		if err != nil {
			return nil, err
		}
		built[name] = kp
		return kp, nil
	}
}

// poolKillDispatcher is a Dispatcher of home h as a supervisor process of it builds one.
func poolKillDispatcher(t *testing.T, h *home.Home, worker string, ca []byte) *dispatch.Dispatcher {
	sealer, err := h.Sealer()
	if err != nil {
		t.Fatal(err)
	}
	p, err := local.New(local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reader := view.New(h.DB, h.Blobs)
	// No agent runtime on PATH: an empty directory of the home's, which the parent test
	// removes (a helper is killed by design, so a t.TempDir of its own would stay behind).
	noRuntimes := filepath.Join(h.Dir, "no-runtimes")
	if err := os.MkdirAll(noRuntimes, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &dispatch.Dispatcher{
		Records: dispatch.NewRecords(h.DB, audit.New(nil), nil),
		Catalog: reader,
		Blobs:   h.Blobs,
		Unseal: func(ctx context.Context, ref string) ([]byte, error) {
			s, err := reader.Sealed(ctx, ref)
			if err != nil {
				return nil, err
			}
			return sealer.Open(ref, s)
		},
		LocalProvider:   p,
		RemoteProviders: poolKillProviders(h.Dir, ca),
		Config:          h.Config,
		StateDir:        filepath.Join(h.Dir, home.DispatchDir),
		Worker:          dispatch.WorkerBinary{Path: worker, Pinner: &workerbin.Pinner{Dir: filepath.Join(h.Dir, workerbin.DirName)}},
		Runtimes:        &runtimebin.Resolver{PATH: noRuntimes},
	}
	// The test runs as root: a root agora runs each dispatch as a leased uid and claims no pool.
	dispatch.StageAsInvokingUser(d)
	return d
}

// adoptUntil runs d's AdoptOrphans as serve's loop does (every 20 ms here) until it reports a
// dispatch adopted or dispatch id is no longer live; it returns what AdoptOrphans reported.
func adoptUntil(ctx context.Context, d *dispatch.Dispatcher, id string) (int, error) {
	for {
		n, err := d.AdoptOrphans(ctx)
		if err != nil || n > 0 {
			return n, err
		}
		r, err := d.Records.Get(ctx, id)
		if err != nil {
			return 0, err
		}
		if lifecycle.DispatchEnded(r.State) {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestHelperPoolSupervisor is a process of TestPoolKill_SupervisorKilledAdoptedOnItsPod: the
// supervisor it kills with -9, or the second adopter. Run alone, it skips.
func TestHelperPoolSupervisor(t *testing.T) {
	role := os.Getenv(pid1Role)
	if role != poolSupervisorRole && role != poolAdopterRole {
		t.Skip("SKIP: a child process of TestPoolKill_SupervisorKilledAdoptedOnItsPod, which runs it")
	}
	ctx := context.Background()
	dir := os.Getenv(poolKillHomeEnv)
	h, err := home.Open(ctx, dir, agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ca, err := os.ReadFile(os.Getenv(poolKillCAEnv))
	if err != nil {
		t.Fatal(err)
	}
	d := poolKillDispatcher(t, h, os.Getenv(poolKillWorkerEnv), ca)
	work := os.Getenv(poolKillDirEnv)
	switch role {
	case poolSupervisorRole:
		// As the one-shot CLI or a detached supervisor: accept, then supervise to the end.
		r, err := d.Accept(ctx, dispatch.Request{Subagent: "quick", Target: "pool", Actor: "test", Timeout: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, "id.tmp"), []byte(r.ID), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(work, "id.tmp"), filepath.Join(work, "id")); err != nil {
			t.Fatal(err)
		}
		final, err := d.Supervise(ctx, r.ID, nil)
		if err != nil {
			t.Fatalf("supervise: %v", err)
		}
		t.Logf("ended %s/%s: %s", final.State, final.Reason, final.Detail)
	case poolAdopterRole:
		// A second serve of the home: ready, it waits for the test's word so that both
		// adopters look at the orphan at once.
		d.Adopt = &dispatch.Adoption{Role: "serve"}
		if err := os.WriteFile(filepath.Join(work, "ready"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(work, "go")); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		n, err := adoptUntil(actx, d, os.Getenv(poolKillIDEnv))
		if err != nil {
			t.Fatalf("adopt: %v", err)
		}
		fmt.Printf("adopter: AdoptOrphans reported %d\n", n)
		d.Adopt.Wait()
	}
}

// poolKill is a process of TestHelperPoolSupervisor; done is closed once it exited (err).
type poolKill struct {
	cmd  *exec.Cmd
	out  *agoratest.SyncBuffer
	done chan struct{}
	err  error
}

// poolKillChild starts a process of TestHelperPoolSupervisor in role; it is killed at the
// test's end if it is still running.
func poolKillChild(t *testing.T, role string, env ...string) *poolKill {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPoolSupervisor$", "-test.v")
	cmd.Env = append(append(os.Environ(), pid1Role+"="+role), env...)
	k := &poolKill{cmd: cmd, out: &agoratest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = k.out, k.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { k.err = cmd.Wait(); close(k.done) }()
	t.Cleanup(func() {
		select {
		case <-k.done:
		default:
			_ = cmd.Process.Kill()
			<-k.done
		}
	})
	return k
}

// kpod is what the test reads of a pod.
type kpod struct {
	Metadata struct {
		Name              string
		UID               string
		Labels            map[string]string
		DeletionTimestamp *string
	}
	Spec struct {
		Volumes []struct {
			Projected *struct {
				Sources []struct {
					ServiceAccountToken *struct{ Audience string }
				}
			}
		}
	}
	Status struct{ Phase string }
}

// endPod plays the kubelet at the end of pod name's worker: its containers terminated with
// code, the pod Succeeded (code 0) or Failed.
func endPod(t *testing.T, c *k8stest.Cluster, name string, code int) {
	t.Helper()
	path := "/api/v1/namespaces/" + c.Namespace + "/pods/" + name
	var pod struct {
		Status struct {
			ContainerStatuses []map[string]any `json:"containerStatuses"`
		} `json:"status"`
	}
	if err := c.Do(t.Context(), http.MethodGet, path, nil, &pod); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	phase, reason := "Succeeded", "Completed"
	if code != 0 {
		phase, reason = "Failed", "Error"
	}
	for _, cs := range pod.Status.ContainerStatuses {
		cs["ready"], cs["started"] = false, false
		cs["state"] = map[string]any{"terminated": map[string]any{"exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now}}
	}
	patch := map[string]any{"status": map[string]any{"phase": phase, "containerStatuses": pod.Status.ContainerStatuses}}
	if err := c.Do(t.Context(), http.MethodPatch, path+"/status", patch, nil); err != nil {
		t.Fatalf("end pod %s: %v", name, err)
	}
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// names lists the names of the objects at the API path (a list, with any selector).
func names(t *testing.T, c *k8stest.Cluster, path string) map[string]string {
	t.Helper()
	var l struct {
		Items []struct {
			Metadata struct {
				Name, UID         string
				DeletionTimestamp *string
			}
		}
	}
	if err := c.Do(t.Context(), http.MethodGet, path, nil, &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range l.Items {
		out[it.Metadata.Name] = it.Metadata.UID
	}
	return out
}

// TestPoolKill_SupervisorKilledAdoptedOnItsPod: kill -9 of the supervisor of a dispatch that
// runs in a pod of agent-sandbox's warm pool (true`), on the kwok control plane
// with agent-sandbox's real controller. The test is the home's serve (it holds the pool, serves
// the gateway the pool pods enrol at, and adopts), and plays the kubelet and the pool pod's
// worker: it mints the pod's projected token, enrols, waits for a dispatch, and at the end
// uploads the worker's result and ends the pod.
//
// A supervisor in a process of its own accepts a dispatch, claims the pool's pod (the worker
// is handed the dispatch) and records it started; the test kills it with -9. Two supervisor
// hosts of the home, this process and another, then race to adopt it. Exactly one does
// (dispatch.adopted once, before the end); it follows the same pod through the same claim (no
// second SandboxClaim, no cold Sandbox or Job of the dispatch's name); the dispatch ends once,
// finished with the result the worker uploaded after the kill; and the claim and the pod's
// Sandbox are deleted as at a pooled dispatch's normal end.
func TestPoolKill_SupervisorKilledAdoptedOnItsPod(t *testing.T) {
	begin := time.Now()
	c := k8stest.Start(t, k8stest.Options{AgentSandbox: true})
	ctx := t.Context()
	docs, err := os.ReadFile("../../examples/kubernetes/rbac-pool.yaml") // the agora-pool ServiceAccount
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+c.Namespace), "\n---\n") {
		if err := c.ApplyYAML(ctx, []byte(doc)); err != nil {
			t.Fatalf("apply examples/kubernetes/rbac-pool.yaml: %v", err)
		}
	}
	work := t.TempDir()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(work, "keys"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(work, "ca.pem")
	if err := os.WriteFile(caFile, certs.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pin := "@sha256:" + strings.Repeat("ab", 32)
	e := newEnvYAML(t, fmt.Sprintf(`targets:
  pool:
    provider: kubernetes
    backend: agent-sandbox
    kubeconfig: %s
    namespace: %s
    image: registry.example/agents/toolchain%s
    worker_image: registry.example/agora/worker%s
    gateway: https://10.250.0.1:8443
    warm: 1
    warm_pool: true
`, c.Kubeconfig, c.Namespace, pin, pin))
	dispatch.StageAsInvokingUser(e.d)
	e.d.RemoteProviders = poolKillProviders(e.home.Dir, certs.CAPEM)
	e.subagent("quick", "echo done")
	ns := c.Namespace

	// serve's gateway over the home's gateway directory: the pool pods enrol at it (their
	// tokens verified by TokenReview) and their workers claim through it.
	gw := filepath.Join(e.home.Dir, "gateway")
	for _, d := range []string{"sessions", "slots"} {
		if err := os.MkdirAll(filepath.Join(gw, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	v, err := e.d.PoolVerifier(ctx)
	if err != nil || v == nil {
		t.Fatalf("PoolVerifier = %v, %v", v, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gwURL := "https://" + ln.Addr().String()
	gctx, stopGW := context.WithCancel(context.Background())
	gwDone := make(chan struct{})
	go func() {
		defer close(gwDone)
		(&netgw.Server{Registry: &netgw.Registry{Dir: filepath.Join(gw, "sessions")}, Slots: &netgw.Slots{Dir: filepath.Join(gw, "slots")},
			Pods: v, Version: workerremote.Version()}).Serve(gctx, ln, certs.Server)
	}()
	t.Cleanup(func() { stopGW(); <-gwDone })

	// The target's first dispatch finds no pool and starts cold, which teaches its shape; the
	// test ends its pod (no result: it fails, which teaches all the same).
	cold, err := e.d.Accept(ctx, dispatch.Request{Subagent: "quick", Target: "pool", Actor: "test", Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	coldDone := make(chan error, 1)
	go func() {
		_, err := e.d.Supervise(context.WithoutCancel(ctx), cold.ID, nil)
		coldDone <- err
	}()
	var coldRec *dispatch.Record
	waitFor(t, time.Minute, "the cold dispatch never started", func() bool {
		coldRec, err = e.d.Records.Get(ctx, cold.ID)
		return err == nil && (coldRec.State == lifecycle.DispatchStarted || lifecycle.DispatchEnded(coldRec.State))
	})
	coldSandbox := "agora-" + strings.ToLower(cold.ID)
	if coldRec.ProviderTaskID != "k8s:"+ns+"/"+coldSandbox {
		t.Fatalf("the cold dispatch: %s, task %q; want started in a Sandbox of its own", coldRec.State, coldRec.ProviderTaskID)
	}
	waitFor(t, time.Minute, "the cold dispatch's pod never ran", func() bool {
		var p kpod
		return c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods/"+coldSandbox, nil, &p) == nil && p.Status.Phase == "Running"
	})
	endPod(t, c, coldSandbox, 0)
	select {
	case err := <-coldDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cold dispatch did not end after its pod did")
	}

	// serve holds the pool (one pod), made from what the cold dispatch taught.
	keeper := e.d.KeepPools(ctx)
	if keeper == nil {
		t.Fatal("KeepPools: no keeper for a warm_pool target")
	}
	t.Cleanup(keeper.Close)
	waitFor(t, 90*time.Second, "the pool has no ready pod", func() bool {
		for _, n := range keeper.Counts() {
			if n.Target == "pool" && n.Ready >= 1 {
				return true
			}
		}
		return false
	})
	var pods struct{ Items []kpod }
	if err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods?labelSelector=agora.pool", nil, &pods); err != nil {
		t.Fatal(err)
	}
	var pod *kpod
	for i := range pods.Items {
		if p := &pods.Items[i]; strings.HasPrefix(p.Metadata.Name, "agora-pool-") && p.Status.Phase == "Running" && p.Metadata.DeletionTimestamp == nil {
			pod = p
		}
	}
	if pod == nil {
		t.Fatalf("no running pod of the pool: %+v", pods.Items)
	}
	// The kubelet's projected token, for the audience the pool's pod asks for, bound to the pod.
	audience := ""
	for _, vol := range pod.Spec.Volumes {
		if vol.Projected != nil {
			for _, s := range vol.Projected.Sources {
				if s.ServiceAccountToken != nil {
					audience = s.ServiceAccountToken.Audience
				}
			}
		}
	}
	var tr struct{ Status struct{ Token string } }
	if err := c.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+kubernetes.PoolServiceAccount+"/token", map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"audiences": []string{audience}, "expirationSeconds": 600,
			"boundObjectRef": map[string]any{"kind": "Pod", "apiVersion": "v1", "name": pod.Metadata.Name, "uid": pod.Metadata.UID}},
	}, &tr); err != nil {
		t.Fatalf("mint pod %s's projected token: %v", pod.Metadata.Name, err)
	}
	// The pod's init step (enrol) and worker (claim its slot, wait for a dispatch).
	slot, err := workerremote.Enroll(ctx, gwURL, certs.CAPEM, tr.Status.Token, nil)
	if err != nil {
		t.Fatalf("pool pod %s's enrolment: %v", pod.Metadata.Name, err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	type claimed struct {
		c   *workerremote.Client
		err error
	}
	handed := make(chan claimed, 1)
	go func() {
		cl, err := workerremote.Claim(wctx, gwURL, slot.Slot, slot.Token, certs.CAPEM, nil)
		handed <- claimed{cl, err}
	}()

	// The supervisor, in a process of its own.
	sup := poolKillChild(t, poolSupervisorRole, poolKillHomeEnv+"="+e.home.Dir,
		poolKillWorkerEnv+"="+e.d.Worker.Path, poolKillCAEnv+"="+caFile, poolKillDirEnv+"="+work)
	var id string
	waitFor(t, 30*time.Second, "the supervisor did not accept a dispatch", func() bool {
		b, err := os.ReadFile(filepath.Join(work, "id"))
		id = string(b)
		return err == nil
	})
	var w claimed
	select {
	case w = <-handed:
	case <-time.After(time.Minute):
		t.Fatalf("the pool pod's worker was handed no dispatch:\n%s", sup.out)
	}
	if w.err != nil || w.c.Dispatch() != id {
		t.Fatalf("the pool pod's worker was handed %v, %v; want dispatch %s", w.c, w.err, id)
	}
	defer w.c.Close()
	var started *dispatch.Record
	waitFor(t, 30*time.Second, "the supervisor never recorded the dispatch started", func() bool {
		started, err = e.d.Records.Get(ctx, id)
		return err == nil && (started.State == lifecycle.DispatchStarted || lifecycle.DispatchEnded(started.State))
	})
	task := "k8s:" + ns + "/" + pod.Metadata.Name
	if started.State != lifecycle.DispatchStarted || started.ProviderTaskID != task {
		t.Fatalf("the dispatch %s/%s, task %q; want started in the pool's pod %s:\n%s", started.State, started.Reason, started.ProviderTaskID, task, sup.out)
	}
	claims := "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/" + ns + "/sandboxclaims"
	byDispatch := "?labelSelector=agora.dispatch%3D" + id
	first := names(t, c, claims+byDispatch)
	if len(first) != 1 {
		t.Fatalf("claims of the dispatch before the kill: %v, want one", first)
	}

	if err := sup.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if <-sup.done; sup.err == nil {
		t.Fatalf("the supervisor ended on its own, not killed:\n%s", sup.out)
	}

	// Two serves of the home adopt at once: this process and another.
	ad := poolKillChild(t, poolAdopterRole, poolKillHomeEnv+"="+e.home.Dir,
		poolKillWorkerEnv+"="+e.d.Worker.Path, poolKillCAEnv+"="+caFile, poolKillDirEnv+"="+work, poolKillIDEnv+"="+id)
	waitFor(t, 30*time.Second, "the second adopter never got ready", func() bool {
		_, err := os.Stat(filepath.Join(work, "ready"))
		return err == nil
	})
	host := *e.d
	host.Adopt = &dispatch.Adoption{Role: "serve"}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// This serve's loop, until it adopted the dispatch or the dispatch ended (the other won).
	actx, stopAdopt := context.WithTimeout(ctx, 2*time.Minute)
	defer stopAdopt()
	type adopted struct {
		n   int
		err error
	}
	here := make(chan adopted, 1)
	go func() {
		n, err := adoptUntil(actx, &host, id)
		here <- adopted{n, err}
	}()
	kinds := func() []string {
		var out []string
		for _, a := range e.audited(started, "") {
			out = append(out, a.Kind)
		}
		return out
	}
	count := func(ks []string, kind string) (n int) {
		for _, k := range ks {
			if k == kind || (kind == "end" && dispatch.DispatchEnd(k)) {
				n++
			}
		}
		return n
	}
	waitFor(t, 30*time.Second, "no dispatch.adopted", func() bool { return count(kinds(), entry.DispatchAdopted) > 0 })

	// Adopted, and still on its pod: the same claim, and nothing started for it again (a cold
	// start would be a Sandbox or Job of the dispatch's own name).
	noColdStart := func(when string) {
		t.Helper()
		own := kubernetesName(id)
		for what, path := range map[string]string{"cold Sandbox": "/apis/agents.x-k8s.io/v1beta1/namespaces/" + ns + "/sandboxes/" + own,
			"Job": "/apis/batch/v1/namespaces/" + ns + "/jobs/" + own} {
			if err := c.Do(ctx, http.MethodGet, path, nil, nil); !k8stest.IsNotFound(err) {
				t.Errorf("%s: a %s of the dispatch's name: %v; want none", when, what, err)
			}
		}
	}
	noColdStart("after the adoption")
	if got := names(t, c, claims+byDispatch); len(got) != 1 || got[kubernetesName(id)] != first[kubernetesName(id)] {
		t.Errorf("claims of the dispatch after the adoption: %v; want the first supervisor's alone %v", got, first)
	}
	var sb struct {
		Metadata struct{ Annotations map[string]string }
	}
	if err := c.Do(ctx, http.MethodGet, "/apis/agents.x-k8s.io/v1beta1/namespaces/"+ns+"/sandboxes/"+pod.Metadata.Name, nil, &sb); err != nil {
		t.Fatal(err)
	}
	if got := sb.Metadata.Annotations["agora.dev/bound-pod"]; got != pod.Metadata.UID {
		t.Errorf("the Sandbox's bound pod %q, want the pod the worker runs in %s", got, pod.Metadata.UID)
	}

	// The worker runs on without its supervisor: it uploads its result and exits 0.
	info, err := w.c.Info(ctx)
	if err != nil {
		cur, _ := e.d.Records.Get(ctx, id)
		t.Fatalf("the worker's session after the adoption: %v\ndispatch %s/%s: %s\naudit %v\nthe other serve:\n%s", err, cur.State, cur.Reason, cur.Detail, kinds(), ad.out)
	}
	var out remote.Mount
	for _, m := range info.Mounts {
		if m.Result {
			out = m
		}
	}
	answer := []byte("forty-two\n")
	sum := sha256.Sum256(answer)
	res := t.TempDir()
	if err := os.MkdirAll(filepath.Join(res, wire.OutputsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(res, wire.OutputsDir, "answer.txt"), answer, 0o600); err != nil {
		t.Fatal(err)
	}
	const detail = "the pool pod's worker, after its supervisor was killed"
	rb, err := wire.Result{Version: wire.ResultVersion, Status: wire.StatusOK, Detail: detail,
		Outputs: []wire.OutputInfo{{Path: wire.OutputsDir + "/answer.txt", Size: int64(len(answer)), SHA256: hex.EncodeToString(sum[:])}}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(res, wire.ResultFile), rb, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Upload(ctx, out, res); err != nil {
		cur, _ := e.d.Records.Get(ctx, id)
		t.Fatalf("the worker's upload after the adoption: %v\ndispatch %s/%s: %s\naudit %v\nthe other serve:\n%s", err, cur.State, cur.Reason, cur.Detail, kinds(), ad.out)
	}
	endPod(t, c, pod.Metadata.Name, 0)

	var final *dispatch.Record
	waitFor(t, time.Minute, "the adopted dispatch never ended", func() bool {
		final, err = e.d.Records.Get(ctx, id)
		return err == nil && lifecycle.DispatchEnded(final.State)
	})
	var n int
	select {
	case a := <-here:
		if a.err != nil {
			t.Fatalf("adopt: %v", a.err)
		}
		n = a.n
	case <-time.After(time.Minute):
		t.Fatal("this serve's adoption loop did not return after the dispatch ended")
	}
	host.Adopt.Wait()
	var other int
	select {
	case <-ad.done:
		if ad.err != nil {
			t.Errorf("the second adopter: %v\n%s", ad.err, ad.out)
		}
		s := ad.out.String()
		i := strings.Index(s, "adopter: AdoptOrphans reported ")
		if i < 0 {
			t.Fatalf("the second adopter said nothing:\n%s", s)
		}
		other, _ = strconv.Atoi(strings.Fields(s[i+len("adopter: AdoptOrphans reported "):])[0])
	case <-time.After(time.Minute):
		t.Fatalf("the second adopter did not exit after the dispatch ended:\n%s", ad.out)
	}
	t.Logf("AdoptOrphans reported %d here, %d in the other serve", n, other)

	ks := kinds()
	t.Logf("audit: %v", ks)
	if count(ks, entry.DispatchAdopted) != 1 {
		t.Errorf("dispatch.adopted %d times, want once (one adopter wins): %v", count(ks, entry.DispatchAdopted), ks)
	}
	if count(ks, "end") != 1 {
		t.Errorf("the dispatch ended %d times, want once: %v", count(ks, "end"), ks)
	}
	for _, k := range ks {
		if dispatch.DispatchEnd(k) {
			t.Errorf("the dispatch ended (%s) before it was adopted: %v", k, ks)
		}
		if k == entry.DispatchAdopted {
			break
		}
	}
	if n+other != 1 {
		t.Errorf("AdoptOrphans reported %d here and %d in the other serve; want one adoption between them", n, other)
	}
	if final.State != lifecycle.DispatchFinished || final.Detail != detail || final.ProviderTaskID != task {
		t.Errorf("the adopted dispatch ended %s/%s (%s), task %q; want finished with the worker's result in %s", final.State, final.Reason, final.Detail, final.ProviderTaskID, task)
	}
	if final.Result == nil || len(final.Result.Outputs) != 1 || final.Result.Outputs[0].Path != "answer.txt" || final.Result.Outputs[0].Size != int64(len(answer)) {
		t.Errorf("the adopted dispatch's outputs: %+v; want the worker's answer.txt", final.Result)
	} else if b, err := e.home.Blobs.Get(final.Result.Outputs[0].Digest, 0); err != nil || !bytes.Equal(b, answer) {
		t.Errorf("the stored answer.txt: %q, %v; want %q", b, err, answer)
	}

	// Nothing was started for it again, and its end cleaned up as a pooled dispatch's does:
	// its claim deleted, and with it the pod's Sandbox.
	noColdStart("after its end")
	waitFor(t, time.Minute, "the dispatch's claim or its Sandbox is still there after its end", func() bool {
		err := c.Do(ctx, http.MethodGet, "/apis/agents.x-k8s.io/v1beta1/namespaces/"+ns+"/sandboxes/"+pod.Metadata.Name, nil, nil)
		return len(names(t, c, claims+byDispatch)) == 0 && k8stest.IsNotFound(err)
	})
	t.Logf("wall time %s", time.Since(begin).Round(time.Millisecond))
}

// kubernetesName is the name agora gives a dispatch's objects (its claim).
func kubernetesName(id string) string { return "agora-" + strings.ToLower(id) }
