package dispatch_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/worker/wire"
	"github.com/agora-dev/agora/internal/workerbin"
)

// agoraBin is the real agora binary, built once: it is what runs inside every sandbox.
var agoraBin string

// TestMain builds the binary, runs the tests, and fails the package when a goroutine a
// test started outlives the tests.
func TestMain(m *testing.M) {
	if home := os.Getenv("AGORA_TEST_DOCKER_SLOT_HOLDER"); home != "" {
		os.Exit(holdDockerSlot(home)) // TestDockerWarm_KilledHolderSweptAtStart's holder
	}
	if os.Getenv(pid1Role) != "" {
		os.Exit(m.Run()) // TestParentSupervisor_PidOne's processes: no binary needed
	}
	code := agoratest.NoLeaks(agoratest.RunWithBinary(m, &agoraBin))
	s3test.StopShared()
	os.Exit(code)
}

type env struct {
	t    testing.TB
	home *home.Home
	w    *provision.Writer
	d    *dispatch.Dispatcher
}

func requireSandbox(t testing.TB) {
	t.Helper()
	if err := local.Available(); err != nil {
		t.Skipf("SKIP: bubblewrap sandbox not available here (apt-get install bubblewrap): %v", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed")
	}
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvYAML(t, "")
}

// newEnvYAML is newEnv with agora.yaml holding yaml (none when empty).
func newEnvYAML(t testing.TB, yaml string) *env {
	t.Helper()
	requireSandbox(t)
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "home")
	if yaml != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "agora.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h, err := home.Open(ctx, dir, agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	sealer, err := h.Sealer()
	if err != nil {
		t.Fatal(err)
	}
	w := provision.New(h.DB, h.Blobs, sealer, audit.New(nil), provision.Options{})
	reader := view.New(h.DB, h.Blobs)
	p, err := local.New(local.Options{})
	if err != nil {
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
		LocalProvider: p,
		Config:        h.Config,
		StateDir:      filepath.Join(dir, home.DispatchDir),
		AgoraBin:      agoraBin,
		Worker: dispatch.WorkerBinary{Path: agoratest.Worker(agoraBin),
			Pinner: &workerbin.Pinner{Dir: filepath.Join(dir, workerbin.DirName)}},
		// An empty PATH: a claude installed on the test machine must not replace the fake
		// the tests ship in a capability. Tests of the host binary configure it.
		Runtimes: &runtimebin.Resolver{PATH: t.TempDir()},
	}
	e := &env{t: t, home: h, w: w, d: d}
	capDir := t.TempDir()
	os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte(`commands: ["sh -c *"]`), 0o644)
	pc, err := w.PrepareCapability("shell", capDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Register(ctx, "test", "register", pc); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) subagent(name, script string) {
	e.t.Helper()
	p, err := e.w.PrepareSubagent(e.t.Context(), name, provision.SubagentSpec{
		Command: []string{"sh", "-c", script}, Capabilities: []string{"shell"},
	}, nil, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, _, err := e.w.Register(e.t.Context(), "test", "register", p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) run(req dispatch.Request) *dispatch.Record {
	e.t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 30 * time.Second
	}
	req.Actor = "test"
	r, err := e.d.Accept(e.t.Context(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	if lifecycle.DispatchEnded(r.State) {
		return r
	}
	r, err = e.d.Supervise(e.t.Context(), r.ID, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) stdout(r *dispatch.Record) string {
	e.t.Helper()
	if r.Result == nil || r.Result.Stdout == nil {
		e.t.Fatalf("dispatch %s (%s %s: %s) has no stdout", r.ID, r.State, r.Reason, r.Detail)
	}
	b, err := e.home.Blobs.Get(r.Result.Stdout.Digest, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func (e *env) stderr(r *dispatch.Record) string {
	e.t.Helper()
	if r.Result == nil || r.Result.Stderr == nil {
		e.t.Fatalf("dispatch %s (%s %s: %s) has no stderr", r.ID, r.State, r.Reason, r.Detail)
	}
	b, err := e.home.Blobs.Get(r.Result.Stderr.Digest, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// TestDispatch_Isolation probes the sandbox from inside a real worker: AGORA_HOME, the host
// home, the parent's environment, paths outside the binds and the host network are out of
// reach.
func TestDispatch_Isolation(t *testing.T) {
	t.Setenv("AGORA_ISOLATION_CANARY", "agora-isolation-canary")
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	hostHome, _ := os.UserHomeDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside"), 0o644)
	probe := func(name, cmd string) string {
		return fmt.Sprintf(`if %s >/dev/null 2>&1; then echo "%s=reachable"; else echo "%s=blocked"; fi; `, cmd, name, name)
	}
	script := probe("agora_home", "ls "+e.home.Dir) +
		probe("secret_key", "cat "+filepath.Join(e.home.Dir, "keys", "secret.key")) +
		probe("host_home", "ls "+hostHome+"/.") +
		probe("outside", "cat "+filepath.Join(outside, "secret.txt")) +
		probe("parent_environ", "grep -q -s agora-isolation-canary /proc/[0-9]*/environ") +
		probe("network", fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d'", port)) +
		probe("etc_shadow", "cat /etc/shadow") +
		probe("workspace", "touch ok.txt")
	e.subagent("prober", script)
	r := e.run(dispatch.Request{Subagent: "prober"})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s)", r.State, r.Reason, r.Detail)
	}
	out := e.stdout(r)
	for _, want := range []string{"agora_home=blocked", "secret_key=blocked", "host_home=blocked", "outside=blocked",
		"parent_environ=blocked", "network=blocked", "etc_shadow=blocked", "workspace=reachable"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in the probe output:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(r.Isolation, "bwrap") {
		t.Errorf("isolation %q, want bwrap...", r.Isolation)
	}

	// The control: the same probe on a target with `network: host` does reach the port, so
	// "blocked" above is the sandbox's doing and not a broken probe.
	hostnet := e.home.Config.Targets["local"]
	hostnet.Network = "host"
	e.home.Config.Targets["hostnet"] = hostnet
	r = e.run(dispatch.Request{Subagent: "prober", Target: "hostnet"})
	if out := e.stdout(r); !strings.Contains(out, "network=reachable") {
		t.Errorf("with network: host the probe should reach the port:\n%s", out)
	}
	if r.Network != "host" {
		t.Errorf("record says network %q, want host", r.Network)
	}
	// The unsafe escape is announced in the dispatch's own log, whatever started it.
	if errOut := e.stderr(r); !strings.Contains(errOut, "WARNING: this dispatch has the host's network") {
		t.Errorf("stderr of a network: host dispatch has no warning:\n%s", errOut)
	}
}

// TestDispatch_Concurrent100 runs 100 dispatches at once: each reaches exactly one terminal
// state and none is lost.
func TestDispatch_Concurrent100(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: -short: 100 sandboxes take a while")
	}
	e := newEnv(t)
	e.subagent("quick", `echo hi > hi.txt`)
	const n = 100
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "quick", Actor: "test", Timeout: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = r.ID
			if _, err := e.d.Supervise(t.Context(), r.ID, nil); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all, err := e.d.Records.List(t.Context(), dispatch.ListFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("%d records, want %d", len(all), n)
	}
	for _, r := range all {
		if r.State != lifecycle.DispatchFinished {
			t.Errorf("%s: state %s (%s: %s)", r.ID, r.State, r.Reason, r.Detail)
		}
		full, err := e.d.Records.Get(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		terminal := 0
		for _, ev := range full.Events {
			if lifecycle.DispatchEnded(ev.Kind) {
				terminal++
			}
		}
		if terminal != 1 {
			t.Errorf("%s: %d terminal events, want exactly 1", r.ID, terminal)
		}
	}
}

// TestDispatch_SupervisorKilled: kill -9 of the process supervising a dispatch kills its
// sandbox, and the next reader records the loss instead of leaving the record live forever.
// A supervisor host (serve, which adopts a Kubernetes Job whose supervisor died) records it
// lost too: a bubblewrap worker died with its supervisor, there is nothing to adopt.
func TestDispatch_SupervisorKilled(t *testing.T) {
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("adopter=%v", host), func(t *testing.T) { testSupervisorKilled(t, host) })
	}
}

func testSupervisorKilled(t *testing.T, adopter bool) {
	e := newEnv(t)
	if adopter {
		e.d.Adopt = &dispatch.Adoption{Role: "serve"}
	}
	marker := fmt.Sprintf("sleep 1000.%d", time.Now().UnixNano()%100000)
	e.subagent("long", marker)
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "long", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	sup := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
	sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := e.d.Records.Get(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State == lifecycle.DispatchStarted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatch never started: %s %s", cur.State, cur.Detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkLifeline(t, r.ID)
	sup.Process.Kill()
	sup.Wait()
	// The sandbox dies with its supervisor (--die-with-parent, and the worker's lifeline
	// while bwrap has not yet made it so).
	deadline = time.Now().Add(10 * time.Second)
	for processWithArg(marker) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent (%s) outlived its killed supervisor", marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n, err := e.d.Reap(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("reaped %d, want 1", n)
	}
	cur, _ := e.d.Records.Get(t.Context(), r.ID)
	if cur.State != lifecycle.DispatchFailed || cur.Reason != lifecycle.ReasonLost {
		t.Fatalf("after reap: %s %s, want failed lost", cur.State, cur.Reason)
	}
	if !strings.Contains(cur.Detail, "the worker died with it") {
		t.Errorf("detail %q", cur.Detail)
	}
}

// checkLifeline asserts that the worker of dispatch id holds a lifeline pipe
// (wire.LifelineFDEnv) from its supervisor. Its environment as started names it (the worker
// drops the variable, which /proc/PID/environ does not show); reading a non-dumpable
// worker's /proc needs root.
func checkLifeline(t *testing.T, id string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("SKIP (part): the worker's lifeline is read from its /proc, which needs root")
		return
	}
	// Recorded started once bwrap released the sandbox, which may not have exec'd yet.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		pid, fd := workerLifeline(id)
		switch {
		case pid != "" && fd == "":
			t.Fatalf("the worker of %s (pid %s) was started without %s", id, pid, wire.LifelineFDEnv)
		case pid != "":
			target, err := os.Readlink(filepath.Join("/proc", pid, "fd", fd))
			if err != nil || !strings.HasPrefix(target, "pipe:") {
				t.Fatalf("the worker's lifeline fd %s is %q (%v), want a pipe", fd, target, err)
			}
			return
		case time.Now().After(deadline):
			t.Fatalf("no worker process of dispatch %s found", id)
		}
	}
}

// workerLifeline finds the process started with AGORA_DISPATCH_ID=id and the lifeline
// descriptor its environment names ("" when none).
func workerLifeline(id string) (pid, fd string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00AGORA_DISPATCH_ID="+id+"\x00")) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := strings.CutPrefix(string(kv), wire.LifelineFDEnv+"="); ok {
				return e.Name(), v
			}
		}
		return e.Name(), ""
	}
	return "", ""
}

func processWithArg(arg string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), arg) {
			return true
		}
	}
	return false
}
