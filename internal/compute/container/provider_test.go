package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

func TestProvider_ExitCodes(t *testing.T) {
	cli := engine(t)
	p := newTestProvider(t, Options{})
	for _, tc := range []struct {
		name   string
		script string
		code   int
		signal string
		stdout string
		stderr string
	}{
		{name: "zero", script: "echo out; echo err >&2", code: 0, stdout: "out\n", stderr: "err\n"},
		{name: "three", script: "exit 3", code: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := shSpec(t, tc.script)
			var out, errb syncBuffer
			s.Stdout, s.Stderr = &out, &errb
			h, err := p.Start(t.Context(), s)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if !strings.HasPrefix(h.TaskID(), "docker:") {
				t.Errorf("task id %q, want docker:<id>", h.TaskID())
			}
			exit, err := h.Wait()
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if exit.Code != tc.code || exit.Signal != tc.signal || exit.TimedOut || exit.Cancelled || exit.Lost {
				t.Errorf("exit %+v, want code %d signal %q", exit, tc.code, tc.signal)
			}
			if exit.Isolation != "docker+readonly+capdrop+seccomp+nonroot+nonet+pids+memory" {
				t.Errorf("isolation %q", exit.Isolation)
			}
			if tc.stdout != "" && out.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", out.String(), tc.stdout)
			}
			if tc.stderr != "" && errb.String() != tc.stderr {
				t.Errorf("stderr %q, want %q", errb.String(), tc.stderr)
			}
			if !containerGone(t, cli, h.TaskID()) {
				t.Errorf("container %s still exists after Wait", h.TaskID())
			}
			// Wait again: the same answer.
			if again, _ := h.Wait(); again != exit {
				t.Errorf("second Wait %+v, want %+v", again, exit)
			}
		})
	}
}

func TestProvider_Timeout(t *testing.T) {
	cli := engine(t)
	p := newTestProvider(t, Options{})
	s := shSpec(t, "sleep 60")
	s.Limits.Timeout = 1500 * time.Millisecond
	start := time.Now()
	exit, _, _ := runSpec(t, p, s)
	if !exit.TimedOut || exit.Cancelled || exit.Code != -1 || exit.Signal != "killed" {
		t.Errorf("exit %+v, want timed out and killed", exit)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v to end a 1.5 s timeout", d)
	}
	_ = cli
}

func TestProvider_CancelContext(t *testing.T) {
	engine(t)
	p := newTestProvider(t, Options{})
	ctx, cancel := contextWithCancel(t)
	s, running := runningSpec(t)
	h, err := p.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	running()
	cancel()
	exit, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !exit.Cancelled || exit.TimedOut || exit.Signal != "killed" {
		t.Errorf("exit %+v, want cancelled and killed", exit)
	}
}

// Cancel works from a second Provider (another process in production) by task id alone,
// and again, and for a task that never existed.
func TestProvider_CancelByTaskID(t *testing.T) {
	cli := engine(t)
	p := newTestProvider(t, Options{})
	other := newTestProvider(t, Options{})
	s, running := runningSpec(t)
	h, err := p.Start(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	running()
	if err := other.Cancel(t.Context(), h.TaskID()); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	exit, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// Cancel kills, then removes: the handle sees the kill (and Lost too when the removal
	// came before its inspect), or, when the removal came before its wait saw the exit
	// (podman then answers the wait with code 0 and an error), Lost with no code: never a
	// clean exit. The dispatcher's cancel flag makes the record cancelled either way.
	killed := exit.Signal == "killed"
	if exit.Code != -1 || !(killed || exit.Lost && exit.Signal == "") || exit.Cancelled || exit.TimedOut {
		t.Errorf("exit %+v, want killed, or lost with no code", exit)
	}
	if !containerGone(t, cli, h.TaskID()) {
		t.Error("container still exists after Cancel")
	}
	if err := other.Cancel(t.Context(), h.TaskID()); err != nil {
		t.Errorf("second Cancel: %v, want nil", err)
	}
	if err := other.Cancel(t.Context(), "docker:"+strings.Repeat("ab", 32)); err != nil {
		t.Errorf("Cancel of an unknown container: %v, want nil", err)
	}
	for _, bad := range []string{"local:1:2", "docker:abc", "docker:agora-x", "docker:" + strings.Repeat("AB", 32)} {
		if err := other.Cancel(t.Context(), bad); !errors.Is(err, ErrBadTaskID) {
			t.Errorf("Cancel(%q) = %v, want ErrBadTaskID", bad, err)
		}
	}
}

func TestNew_Refuses(t *testing.T) {
	engine(t)
	img := toolchainImage(t)
	name, _, _ := strings.Cut(img, "@")
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{name: "tag", o: Options{Image: name}, want: "not pinned by digest"},
		{name: "latest", o: Options{Image: "busybox:latest"}, want: "not pinned by digest"},
		{name: "absent", o: Options{Image: "localhost/agora-absent@sha256:" + strings.Repeat("0", 64)}, want: "not present on the container engine"},
		{name: "runtime", o: Options{Image: img, Runtime: "runc"}, want: `runtime "runc" is not supported`},
		{name: "cpus", o: Options{Image: img, CPUs: -1}, want: "cpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Host = testHost()
			p, err := New(t.Context(), tc.o)
			if err == nil {
				p.Close()
				t.Fatalf("New(%+v) succeeded, want an error with %q", tc.o, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want %q in it", err, tc.want)
			}
		})
	}
}

// A spec the provider cannot honour is refused before anything is created.
func TestProvider_StartRefuses(t *testing.T) {
	engine(t)
	p := newTestProvider(t, Options{})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		name string
		edit func(*compute.Spec)
		want string
	}{
		{name: "network", edit: func(s *compute.Spec) { s.Network = true }, want: "network: host is not available on a container target"},
		{name: "root", edit: func(s *compute.Spec) { s.RunAs = &compute.HostUser{UID: 0, GID: 0} }, want: "uid or gid 0 refused"},
		{name: "rootgroup", edit: func(s *compute.Spec) { s.RunAs = &compute.HostUser{UID: 1000, GID: 0} }, want: "uid or gid 0 refused"},
		{name: "twofiles", edit: func(s *compute.Spec) { s.Files = []*os.File{r, r} }, want: "at most one"},
		{name: "unsandboxed", edit: func(s *compute.Spec) { s.Sandbox = compute.SandboxNone }, want: "not available on a container target"},
		{name: "badid", edit: func(s *compute.Spec) { s.ID = "../x" }, want: "cannot name a container"},
		{name: "relative", edit: func(s *compute.Spec) { s.Binds = append(s.Binds, compute.Bind{Src: "x", Dst: "/x"}) }, want: "absolute"},
		{name: "overroot", edit: func(s *compute.Spec) { s.Binds = append(s.Binds, compute.Bind{Src: "/tmp", Dst: "/"}) }, want: "absolute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := shSpec(t, "true")
			tc.edit(&s)
			h, err := p.Start(t.Context(), s)
			if err == nil {
				h.Wait()
				t.Fatalf("Start succeeded, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want %q in it", err, tc.want)
			}
		})
	}
}

// writableDir is a host directory the container user (uid:gid) may write.
func writableDir(t testing.TB, uid, gid int) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "rw")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	return d
}

// The attack on the record: someone with the engine's socket removes the container. The
// handle never reports an ordinary end: not the exit 0 podman answers a wait with when the
// container was removed before the wait saw it stop. A forced removal is the engine's kill,
// then the removal, as Cancel's is (TestProvider_CancelByTaskID): the handle reports Lost
// when its inspect finds the container gone, and the kill when the inspect came between the
// two (the container stopped by SIGKILL, not yet removed); podman reports no OOMKilled for
// a memory-limit death of PID 1 either, so the two cannot be told apart there.
func TestProvider_RemovedBehindItsBack(t *testing.T) {
	cli := engine(t)
	p := newTestProvider(t, Options{})
	s, running := runningSpec(t)
	h, err := p.Start(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	running()
	id, _ := parseTaskID(h.TaskID())
	if _, err := cli.ContainerRemove(t.Context(), id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	exit, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != -1 || !(exit.Lost || exit.Signal == "killed") || exit.Cancelled || exit.TimedOut {
		t.Errorf("exit %+v, want lost or killed, with no exit code", exit)
	}
}

// Killing a container that has stopped but is not yet removed is no error: two cancels of one
// dispatch (the supervisor's cancel watch and `agora dispatch cancel`) race to kill it, and
// podman answers the second "can only kill running containers ... container state improper",
// which it does not mark a conflict (TestDockerWarm_Cancel failed so, 1 run in 4).
func TestProvider_KillStoppedIsNoError(t *testing.T) {
	p := newTestProvider(t, Options{})
	cli := engine(t)
	s := shSpec(t, "exit 0")
	opts, _, err := p.createOptions(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cli.ContainerCreate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.remove(c.ID)
	if _, err := cli.ContainerStart(t.Context(), c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	agoratest.Eventually(t, 30*time.Second, "the container to stop", func() error {
		ins, err := cli.ContainerInspect(t.Context(), c.ID, client.ContainerInspectOptions{})
		if err != nil {
			// podman's inspect of a container whose process is exiting can fail reading
			// that process's cgroup ("read /proc/N/cgroup: no such process"): asked
			// again, it answers. An error that lasts fails at the deadline.
			return fmt.Errorf("inspect: %w", err)
		}
		if ins.Container.State == nil || ins.Container.State.Running {
			return errors.New("it runs")
		}
		return nil
	})
	if err := p.kill(c.ID); err != nil {
		t.Fatalf("kill of a stopped container: %v", err)
	}
}
