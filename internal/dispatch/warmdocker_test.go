package dispatch_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/netgw"
)

// dockerWarmEnv is an env whose docker target "box" keeps n warm slots, held by this
// (resident) Dispatcher.
func dockerWarmEnv(t testing.TB, n int) (*env, *dispatch.WarmPools) {
	t.Helper()
	return dockerWarmEnvWith(t, n)
}

// dockerWarmEnvWith is dockerWarmEnv with more docker targets, each "box"'s settings without
// warm slots.
func dockerWarmEnvWith(t testing.TB, n int, cold ...string) (*env, *dispatch.WarmPools) {
	t.Helper()
	image := requireContainer(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: docker warm slots need root (a uid of the sandbox range per slot)")
	}
	e := newEnv(t)
	e.addDockerTarget(image)
	tg := e.home.Config.Targets["box"]
	for _, name := range cold {
		e.home.Config.Targets[name] = tg
	}
	tg.Warm = n
	e.home.Config.Targets["box"] = tg
	w, err := e.d.StartWarm(t.Context())
	if err != nil || w == nil {
		t.Fatalf("StartWarm: %v, %v", w, err)
	}
	t.Cleanup(w.Close)
	return e, w
}

func boxCounts(w *dispatch.WarmPools) warm.Counts {
	for _, c := range w.Counts() {
		if c.Target == "box" {
			return c
		}
	}
	return warm.Counts{}
}

// A docker target's warm dispatch, end to end in the resident Dispatcher on podman: the first
// dispatch starts cold and teaches the pool its shape; the next claims a started slot
// container over the gateway's socket and ends exactly as the cold one did: state, output,
// patch, isolation, the secret delivered and nowhere in the logs; the slot is used once.
func TestDockerWarm_DispatchRunsInSlot(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	const secret = "warm-secret-7c1f0a93"
	e.envBundle("creds", nil, map[string]string{"API_TOKEN": secret})
	e.subagent("editor", `printf 'hello\n' > greeting.txt
sed -i 's/one/uno/' README
[ "$API_TOKEN" = `+secret+` ] && echo token=ok
echo "uid-nonroot=$([ "$(id -u)" != 0 ] && echo yes)"`)
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n"})
	req := dispatch.Request{Subagent: "editor", Repo: repo, Target: "box", Envs: []string{"creds"}, Timeout: 2 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	deadline := time.Now().Add(90 * time.Second)
	for boxCounts(w).Ready < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
		}
		time.Sleep(50 * time.Millisecond)
	}
	hot := e.run(req)
	t.Logf("warm: %s %s %s stdout %q stderr %q", hot.State, hot.Reason, hot.Detail, e.stdout(hot), e.stderr(hot))
	wantFinished(t, hot)
	if c := boxCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want claimed 1 (the warm dispatch), cold 0 (the first ran before the pool)", c)
	}
	for _, r := range []*dispatch.Record{cold, hot} {
		out := e.stdout(r)
		if !strings.Contains(out, "token=ok") || !strings.Contains(out, "uid-nonroot=yes") {
			t.Errorf("dispatch %s: stdout %q", r.ID, out)
		}
		if strings.Contains(out, secret) || strings.Contains(e.stderr(r), secret) {
			t.Errorf("dispatch %s: the secret is in its logs", r.ID)
		}
	}
	if cold.Isolation != hot.Isolation {
		t.Errorf("isolation: cold %q, warm %q", cold.Isolation, hot.Isolation)
	}
	if cp, hp := e.patch(cold), e.patch(hot); cp != hp || !strings.Contains(hp, "+uno") || !strings.Contains(hp, "+hello") {
		t.Errorf("patches differ or lack the edit:\ncold:\n%s\nwarm:\n%s", cp, hp)
	}
	if !strings.HasPrefix(hot.ProviderTaskID, "docker:") {
		t.Errorf("warm task id %q", hot.ProviderTaskID)
	}
}

// `agora dispatch cancel` of a dispatch running in a docker slot kills and removes the slot's
// container through the record's task id, as for a cold container (the slot container carries
// agora.slot, not agora.dispatch).
func TestDockerWarm_Cancel(t *testing.T) {
	e, w := dockerWarmEnv(t, 1)
	e.subagent("sleeper", `echo started; sleep 120`)
	req := dispatch.Request{Subagent: "sleeper", Target: "box", Timeout: 3 * time.Minute, Actor: "test"}
	// The first, cold, dispatch teaches the pool the shape; cancel it at once.
	for i, wantClaimed := range []uint64{0, 1} {
		if i == 1 {
			deadline := time.Now().Add(90 * time.Second)
			for boxCounts(w).Ready < 1 {
				if time.Now().After(deadline) {
					t.Fatalf("docker warm slots: %+v, want 1 ready", boxCounts(w))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		ctx := t.Context()
		r, err := e.d.Accept(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *dispatch.Record, 1)
		go func() {
			rec, err := e.d.Supervise(ctx, r.ID, nil)
			if err != nil {
				t.Error(err)
			}
			done <- rec
		}()
		var task string
		agoratest.Poll(60*time.Second, func() bool {
			if cur, err := e.d.Records.Get(ctx, r.ID); err == nil {
				task = cur.ProviderTaskID
			}
			return task != ""
		})
		if task == "" {
			t.Fatalf("dispatch %d: no task recorded", i)
		}
		if _, err := e.d.Cancel(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case final := <-done:
			if final == nil || final.State != lifecycle.DispatchCancelled {
				t.Fatalf("dispatch %d ended %+v, want cancelled", i, final)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("dispatch %d: not cancelled within 60 s", i)
		}
		if c := boxCounts(w); c.Claimed != wantClaimed {
			t.Fatalf("dispatch %d: counts %+v, want claimed %d", i, c, wantClaimed)
		}
	}
}

// Attack: the process holding a home's docker slots is killed with -9. Its slot containers
// stay (nothing of the engine's dies with it) and its gateway slots stand: the next holder's
// StartWarm revokes the slots and removes their containers before it starts any, so no slot of
// the killed holder is ever claimed. (The killed holder here is this test binary in
// docker-slot-holder mode, leaving exactly what fillDocker leaves: a gateway slot held under
// AGORA_HOME/gateway/slots and its container labelled with the home.)
func TestDockerWarm_KilledHolderSweptAtStart(t *testing.T) {
	image := requireContainer(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: docker warm slots need root")
	}
	e := newEnv(t)
	e.addDockerTarget(image)
	tg := e.home.Config.Targets["box"]
	tg.Warm = 1
	e.home.Config.Targets["box"] = tg
	homeDir := filepath.Dir(e.d.StateDir)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "AGORA_TEST_DOCKER_SLOT_HOLDER="+homeDir, "AGORA_TEST_IMAGE="+image, "AGORA_TEST_DOCKER_HOST="+containerHost(), "AGORA_TEST_AGORA_BIN="+e.d.Worker.Path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	slotID, ctrID, ok := strings.Cut(strings.TrimSpace(line), " ")
	if err != nil || !ok {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("holder said %q: %v", line, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	cli, err := client.New(client.WithHost(containerHost()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ContainerInspect(t.Context(), ctrID, client.ContainerInspectOptions{}); err != nil {
		t.Fatalf("the killed holder's slot container is not there to sweep: %v", err)
	}
	w, err := e.d.StartWarm(t.Context())
	if err != nil || w == nil {
		t.Fatalf("StartWarm: %v %v", w, err)
	}
	defer w.Close()
	if _, err := cli.ContainerInspect(t.Context(), ctrID, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("the killed holder's slot container %s survived StartWarm", ctrID)
	}
	if _, err := os.Lstat(filepath.Join(homeDir, "gateway", "slots", slotID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed holder's gateway slot %s stands after StartWarm: %v", slotID, err)
	}
}

// holdDockerSlot is the killed holder of TestDockerWarm_KilledHolderSweptAtStart: it makes a
// gateway slot and its slot container below the home in AGORA_TEST_DOCKER_SLOT_HOLDER, says
// their ids and waits to be killed.
func holdDockerSlot(homeDir string) int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "holder:", err); return 1 }
	gw := filepath.Join(homeDir, "gateway")
	if err := os.MkdirAll(gw, 0o700); err != nil {
		return fail(err)
	}
	sock := filepath.Join(gw, "holder-test.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fail(err)
	}
	defer ln.Close()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(gw, "slot-keys"), []string{"slots.agora.internal"})
	if err != nil {
		return fail(err)
	}
	sl, err := (&netgw.Slots{Dir: filepath.Join(gw, "slots")}).Create(ctx)
	if err != nil {
		return fail(err)
	}
	p, err := container.New(ctx, container.Options{Host: os.Getenv("AGORA_TEST_DOCKER_HOST"), Image: os.Getenv("AGORA_TEST_IMAGE")})
	if err != nil {
		return fail(err)
	}
	// The worker binary serves the slot's fdpass entrypoint (the token to fd 3).
	box, err := p.StartSlot(ctx, compute.Spec{Argv: []string{"/bin/sh", "-c", "sleep 600"}, Env: []string{"PATH=/bin:/usr/bin"},
		Binds: []compute.Bind{{Src: os.Getenv("AGORA_TEST_AGORA_BIN"), Dst: container.DefaultShimPath}},
		RunAs: &compute.HostUser{UID: 0x7000f000, GID: 0x7000f000}},
		container.SlotOptions{ID: sl.ID, Token: sl.Token, Home: homeDir, Holder: "killed-test-holder",
			GatewayURL: "https://slots.agora.internal:443", GatewayCA: certs.CAPEM, GatewaySocket: sock, Stderr: os.Stderr})
	if err != nil {
		return fail(err)
	}
	fmt.Println(sl.ID, strings.TrimPrefix(box.Handle().TaskID(), "docker:"))
	select {}
}

// A process that cannot hold docker slots (here: AGORA_HOME/gateway is not a directory) holds
// none and says so, and still holds its local ones: StartWarm does not fail on its docker part.
func TestDockerWarm_GatewayUnusableKeepsLocalSlots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: warm slots need root")
	}
	e := newEnv(t)
	local := e.home.Config.Targets["local"]
	local.Warm = 1
	e.home.Config.Targets["local"] = local
	box := local
	box.Provider = "docker"
	e.home.Config.Targets["box"] = box
	if err := os.WriteFile(filepath.Join(filepath.Dir(e.d.StateDir), "gateway"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := e.d.StartWarm(t.Context())
	if err != nil || w == nil {
		t.Fatalf("StartWarm: %v, %v: its docker part failed the local slots too", w, err)
	}
	w.Close()
}
