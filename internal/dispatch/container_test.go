package dispatch_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/container"
	"github.com/agora-dev/agora/internal/compute/container/slots"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// containerHost is the engine the container tests use: $DOCKER_HOST, else the socket
// scripts/podman.sh serves.
func containerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix:///run/agora-podman.sock"
}

var (
	toolchainOnce sync.Once
	toolchainRef  string
)

// requireContainer skips loudly unless a Docker API answers and the toolchain image is
// there (scripts/images.sh builds it, cached), and returns the image's digest reference.
func requireContainer(t testing.TB) string {
	t.Helper()
	host := containerHost()
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = cli.Ping(ctx, client.PingOptions{})
		cancel()
		cli.Close()
	}
	if err != nil {
		t.Skipf("SKIP: no Docker API at %s: %v: run scripts/podman.sh", host, err)
	}
	toolchainOnce.Do(func() {
		if ref := os.Getenv("AGORA_TOOLCHAIN_IMAGE"); ref != "" {
			toolchainRef = ref
			return
		}
		script, _ := filepath.Abs("../../scripts/images.sh")
		out, err := exec.Command(script, "toolchain").Output()
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "AGORA_TOOLCHAIN_IMAGE="); ok {
				toolchainRef = v
			}
		}
	})
	if toolchainRef == "" {
		t.Skip("SKIP: no toolchain image: run scripts/images.sh toolchain (or set AGORA_TOOLCHAIN_IMAGE)")
	}
	return toolchainRef
}

// addDockerTarget adds target "box": the default target's settings on provider docker.
func (e *env) addDockerTarget(image string) {
	tg := e.home.Config.Targets[config.DefaultTarget]
	tg.Provider = config.ProviderDocker
	tg.Image = image
	e.home.Config.Targets["box"] = tg
	// One provider per image and runtime for the test's life, closed at its end, as the CLI
	// keeps one per target: a provider per dispatch left its engine connections open (goleak).
	var mu sync.Mutex
	built := map[string]*slots.Provider{}
	e.t.Cleanup(func() {
		for _, p := range built {
			p.Close()
		}
	})
	e.d.RemoteProviders = func(ctx context.Context, _ string, tg config.Target) (compute.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p := built[tg.Image+" "+tg.Runtime]; p != nil {
			return p, nil
		}
		cp, err := container.New(ctx, container.Options{Host: containerHost(), Image: tg.Image, Runtime: tg.Runtime})
		if err != nil {
			return nil, err
		}
		// Its docker slots, as the CLI's providers keep them (compute/container/slots).
		p := slots.New(cp, slots.Options{Home: filepath.Dir(e.d.StateDir), Version: workerremote.VersionOf(e.d.Worker.Path)})
		built[tg.Image+" "+tg.Runtime] = p
		return p, nil
	}
}

// The same subagent on the same commit yields the same patch in a container as under
// bubblewrap, with its secret delivered on fd 3 (through fdpass) and nowhere else.
func TestDispatch_ContainerSamePatchAsLocal(t *testing.T) {
	image := requireContainer(t)
	e := newEnv(t)
	e.addDockerTarget(image)
	const secret = "ctr-secret-5b9e2d41"
	e.envBundle("creds", nil, map[string]string{"API_TOKEN": secret})
	e.subagent("editor", `printf 'hello\n' > greeting.txt
sed -i 's/one/uno/' README
rm gone.txt
[ "$API_TOKEN" = `+secret+` ] && echo token=ok
echo "uid=$(id -u)"`)
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})

	var patches [2]string
	for i, target := range []string{"", "box"} {
		r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: target, Envs: []string{"creds"}, Timeout: 2 * time.Minute})
		wantFinished(t, r)
		out := e.stdout(r)
		if !strings.Contains(out, "token=ok") {
			t.Errorf("target %q: the secret did not reach the agent; stdout %q stderr %q", target, out, e.stderr(r))
		}
		if strings.Contains(out, secret) || strings.Contains(e.stderr(r), secret) {
			t.Errorf("target %q: the secret is in the logs", target)
		}
		if r.Result.Patch == nil {
			t.Fatalf("target %q: no patch", target)
		}
		patches[i] = e.blob(r.Result.Patch)
		t.Logf("target %q: task %s, isolation %s", target, r.ProviderTaskID, r.Isolation)
		if target == "box" {
			if !strings.HasPrefix(r.ProviderTaskID, "docker:") {
				t.Errorf("task id %q, want docker:<id>", r.ProviderTaskID)
			}
			if !strings.HasPrefix(r.Isolation, "docker+readonly+capdrop+seccomp+nonroot+nonet") {
				t.Errorf("isolation %q", r.Isolation)
			}
			if strings.Contains(out, "uid=0\n") {
				t.Errorf("the container ran as root: %q", out)
			}
		}
	}
	if patches[0] != patches[1] {
		t.Errorf("patches differ:\nlocal:\n%s\ncontainer:\n%s", patches[0], patches[1])
	}
	for _, want := range []string{"+hello", "-one", "+uno", "gone.txt"} {
		if !strings.Contains(patches[1], want) {
			t.Errorf("container patch lacks %q:\n%s", want, patches[1])
		}
	}
}

// A worker that exits non-zero in a container fails the dispatch as it does locally.
func TestDispatch_ContainerAgentFails(t *testing.T) {
	image := requireContainer(t)
	e := newEnv(t)
	e.addDockerTarget(image)
	e.subagent("failer", `echo trying; exit 3`)
	r := e.run(dispatch.Request{Subagent: "failer", Target: "box", Timeout: time.Minute})
	if r.State != lifecycle.DispatchFailed {
		t.Fatalf("state %s (%s: %s), want failed", r.State, r.Reason, r.Detail)
	}
	if !strings.Contains(e.stdout(r), "trying") {
		t.Errorf("stdout %q", e.stdout(r))
	}
}

// `agora dispatch cancel` of a running container dispatch kills the container through the
// record's task id and target, and the supervisor records cancelled.
func TestDispatch_ContainerCancel(t *testing.T) {
	image := requireContainer(t)
	e := newEnv(t)
	e.addDockerTarget(image)
	e.subagent("sleeper", `echo started; sleep 120`)
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "sleeper", Target: "box", Timeout: 3 * time.Minute, Actor: "test"})
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
	if !strings.HasPrefix(task, "docker:") {
		t.Fatalf("no docker task recorded (got %q)", task)
	}
	start := time.Now()
	if _, err := e.d.Cancel(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	final := <-done
	if final == nil || final.State != lifecycle.DispatchCancelled {
		t.Fatalf("dispatch ended %+v, want cancelled", final)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("cancel took %v", d)
	}
	cli, err := client.New(client.WithHost(containerHost()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ContainerInspect(ctx, strings.TrimPrefix(task, "docker:"), client.ContainerInspectOptions{}); err == nil {
		t.Errorf("container %s still exists after the cancel", task)
	}
}
