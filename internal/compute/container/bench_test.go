package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// BenchmarkProvider_NoOp is one container from create to removal for a no-op program, with
// every hardening option, through the Docker API.
func BenchmarkProvider_NoOp(b *testing.B) {
	engine(b)
	p := newTestProvider(b, Options{})
	for b.Loop() {
		id := testID(b)
		s := compute.Spec{ID: id, Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, RunAs: testUser(id)}
		h, err := p.Start(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		if exit, err := h.Wait(); err != nil || exit.Code != 0 {
			b.Fatalf("exit %+v %v", exit, err)
		}
	}
}

// BenchmarkProvider_NoOpSecret adds the fdpass path: the secret on stdin, moved to fd 3.
func BenchmarkProvider_NoOpSecret(b *testing.B) {
	engine(b)
	p := newTestProvider(b, Options{})
	for b.Loop() {
		r, _ := pipeWith(b, `{"K":"v"}`)
		id := testID(b)
		s := compute.Spec{ID: id, Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}, RunAs: testUser(id),
			Binds: []compute.Bind{selfBind(b)}, Files: []*os.File{r}}
		h, err := p.Start(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		if exit, err := h.Wait(); err != nil || exit.Code != 0 {
			b.Fatalf("exit %+v %v", exit, err)
		}
	}
}

// BenchmarkPodmanRun is the baseline: `podman run --rm` of the same image and program with
// the same hardening flags, through the podman CLI.
func BenchmarkPodmanRun(b *testing.B) {
	engine(b)
	img := toolchainImage(b)
	if _, err := exec.LookPath("podman"); err != nil {
		b.Skip("SKIP: no podman CLI")
	}
	for b.Loop() {
		out, err := exec.Command("podman", "run", "--rm", "--read-only", "--cap-drop=ALL",
			"--security-opt=no-new-privileges", "--network=none", "--user=65534:65534",
			"--pids-limit=256", "--memory=4g", "--memory-swap=4g", img, "/bin/true").CombinedOutput()
		if err != nil {
			b.Fatalf("podman run: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
}

// BenchmarkSlot_Warm is a docker warm slot's start of a no-op dispatch: from binding the
// dispatch's session to a slot whose container already waits on the gateway's socket, to its
// worker running with that dispatch (TLS over the socket, the claim, GET session, then its
// first line). The slot's fill (its container's create and start) and the container's end and
// removal run with the timer stopped: the pool does the one ahead, and the other follows the
// dispatch, cold or warm alike. Compare BenchmarkSlot_Cold in the same run.
func BenchmarkSlot_Warm(b *testing.B) {
	p := newTestProvider(b, Options{})
	g := startSlotGateway(b, "")
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sl, err := g.slots.Create(ctx)
		if err != nil {
			b.Fatal(err)
		}
		ready, waiting := newFirstWrite(), newFirstWrite()
		slot, err := p.StartSlot(ctx, slotSpec(b, "probe-claim-exit"), g.options(sl, ready, waiting))
		if err != nil {
			b.Fatal(err)
		}
		// A ready slot's worker waits on its claim already: the gateway holds its claim.
		<-waiting.ch
		agoratest.WaitFor(b, time.Minute, "the slot's claim to wait at the gateway", func() bool { return g.srv.ClaimsWaiting(sl.ID) == 1 })
		sess, err := g.reg.Export(ctx, compute.Spec{ID: "01BENCH" + itoa(i)})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := sl.Bind(ctx, sess.Dispatch, sess.Token); err != nil {
			b.Fatal(err)
		}
		<-ready.ch
		b.StopTimer()
		if exit, err := slot.Handle().Wait(); err != nil || exit.Code != 0 {
			b.Fatalf("exit %+v %v", exit, err)
		}
		sess.Close()
		sl.Close()
		b.StartTimer()
	}
}

// BenchmarkSlot_Cold is the cold start of the same no-op: a container created and started
// with a secret on fd 3 (fdpass), to its program's first line: what a docker dispatch's start
// costs today. Its end and removal run with the timer stopped, as the warm one's.
func BenchmarkSlot_Cold(b *testing.B) {
	p := newTestProvider(b, Options{})
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r, _ := pipeWith(b, `{"K":"v"}`)
		id := testID(b)
		ready := newFirstWrite()
		s := compute.Spec{ID: id, Argv: []string{DefaultShimPath, "probe-noop"}, Env: []string{"PATH=/bin"}, RunAs: testUser(id),
			Binds: []compute.Bind{selfBind(b)}, Files: []*os.File{r}, Stdout: ready}
		b.StartTimer()
		h, err := p.Start(b.Context(), s)
		if err != nil {
			b.Fatal(err)
		}
		<-ready.ch
		b.StopTimer()
		if exit, err := h.Wait(); err != nil || exit.Code != 0 {
			b.Fatalf("exit %+v %v", exit, err)
		}
		b.StartTimer()
	}
}

// firstWrite closes ch at its first write.
type firstWrite struct {
	ch   chan struct{}
	once sync.Once
}

func newFirstWrite() *firstWrite { return &firstWrite{ch: make(chan struct{})} }

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { close(f.ch) })
	return len(p), nil
}

// probeClaimExit is the warm no-op: claim the slot's dispatch, read its session, say so, exit.
func probeClaimExit() int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fmt.Fprintln(os.Stderr, "CLAIMING")
	c, err := workerremote.ClaimFromEnv(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	if _, err := c.Info(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	fmt.Println("READY")
	return 0
}
