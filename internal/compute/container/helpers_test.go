package container

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// defaultTestHost is where scripts/podman.sh serves podman's Docker API.
const defaultTestHost = "unix:///run/agora-podman.sock"

// testHost is the engine the tests use: $DOCKER_HOST, else scripts/podman.sh's socket.
func testHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return defaultTestHost
}

// engine skips the test loudly unless a Docker API answers at testHost.
func engine(t testing.TB) *client.Client {
	t.Helper()
	host := testHost()
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Skipf("SKIP: no Docker API at %s: %v: run scripts/podman.sh", host, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		t.Skipf("SKIP: no Docker API at %s: %v: run scripts/podman.sh", host, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// toolchainImage is the digest reference of the test toolchain image: $AGORA_TOOLCHAIN_IMAGE,
// else what scripts/images.sh builds (cached: a rebuild only when its inputs change).
func toolchainImage(t testing.TB) string {
	t.Helper()
	engine(t)
	imageOnce.Do(func() {
		if ref := os.Getenv("AGORA_TOOLCHAIN_IMAGE"); ref != "" {
			imageRef = ref
			return
		}
		if _, err := exec.LookPath("podman"); err != nil {
			imageErr = err
			return
		}
		script, _ := filepath.Abs("../../../scripts/images.sh")
		out, err := exec.Command(script, "toolchain").Output()
		if err != nil {
			imageErr = err
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "AGORA_TOOLCHAIN_IMAGE="); ok {
				imageRef = v
			}
		}
	})
	if imageRef == "" {
		t.Skipf("SKIP: no toolchain image (%v): run scripts/images.sh toolchain and set AGORA_TOOLCHAIN_IMAGE", imageErr)
	}
	return imageRef
}

// newTestProvider returns a provider on the test engine and image; o's Host and Image are
// filled in when empty.
func newTestProvider(t testing.TB, o Options) *Provider {
	t.Helper()
	if o.Image == "" {
		o.Image = toolchainImage(t)
	}
	if o.Host == "" {
		o.Host = testHost()
	}
	p, err := New(t.Context(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// selfBind binds this test binary at the shim path, for fdpass and the probes.
func selfBind(t testing.TB) compute.Bind {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return compute.Bind{Src: exe, Dst: DefaultShimPath}
}

var idSeq struct {
	sync.Mutex
	n int
}

// testID is a fresh dispatch id, unique across test processes.
func testID(t testing.TB) string {
	idSeq.Lock()
	defer idSeq.Unlock()
	idSeq.n++
	return strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))[:min(40, len(t.Name()))] +
		"-" + time.Now().Format("150405.000000") + "-" + string(rune('a'+idSeq.n%26))
}

// shSpec runs script under busybox sh as a uid of its own (testUser), with the test
// binary bound.
func shSpec(t testing.TB, script string) compute.Spec {
	id := testID(t)
	return compute.Spec{
		ID:    id,
		Argv:  []string{"/bin/sh", "-c", script},
		Env:   []string{"PATH=/usr/bin:/bin"},
		Binds: []compute.Bind{selfBind(t)},
		RunAs: testUser(id),
	}
}

// testUIDBase is the first of the test uids: the default sandbox_uid range's upper half, so
// no test container shares a uid with a dispatch of a default target or a host account.
const testUIDBase = 0x70008000

// testUser is the host user the container of dispatch id runs as: one of 32768 uids by the
// id's FNV-1a hash, as a root agora picks one per dispatch.
func testUser(id string) *compute.HostUser {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	uid := testUIDBase + h%0x8000
	return &compute.HostUser{UID: uid, GID: uid}
}

// runSpec starts s, waits, and returns how it ended and what it wrote.
func runSpec(t testing.TB, p *Provider, s compute.Spec) (compute.Exit, string, string) {
	t.Helper()
	var out, errb syncBuffer
	s.Stdout, s.Stderr = &out, &errb
	h, err := p.Start(t.Context(), s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	exit, err := h.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return exit, out.String(), errb.String()
}

// syncBuffer is a bytes.Buffer safe to write from the output goroutine and read after.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// containerGone reports whether the engine no longer has the container of taskID.
func containerGone(t testing.TB, cli *client.Client, taskID string) bool {
	t.Helper()
	id, err := parseTaskID(taskID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	return isNotFound(err)
}

// contextWithCancel is t.Context with a cancel of its own.
func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

// waitFile waits up to 30 s for path to exist.
func waitFile(path string) bool {
	return agoratest.Poll(30*time.Second, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// runningSpec is the spec of a container whose command runs until killed, and the function
// that waits until it runs: its first line has reached the handle's output.
func runningSpec(t *testing.T) (compute.Spec, func()) {
	t.Helper()
	s := shSpec(t, "echo running; exec sleep 60")
	out := &agoratest.SyncBuffer{}
	s.Stdout = out
	return s, func() {
		t.Helper()
		agoratest.WaitFor(t, time.Minute, "the container's command to run", func() bool { return strings.Contains(out.String(), "running") })
	}
}

func clientInspect() client.ContainerInspectOptions { return client.ContainerInspectOptions{} }

func itoa(n int) string { return strconv.Itoa(n) }

// pipeWith returns the read end of a pipe that holds s and is then closed.
func pipeWith(t testing.TB, s string) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write([]byte(s)); w.Close() }()
	t.Cleanup(func() { r.Close() })
	return r, w
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return def
	}
	return n
}
