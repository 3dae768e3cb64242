package container

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// The attack: a fork bomb. The pids limit stops it short of the host's process table.
func TestProvider_PidsLimit(t *testing.T) {
	engine(t)
	p := newTestProvider(t, Options{})
	// busybox sh gives up at the first fork that fails; the count is kept with builtins
	// only, which need no fork.
	s := shSpec(t, `
( n=0; while [ $n -lt 100 ]; do sleep 30 & n=$((n+1)); echo $n > /tmp/n; done ) 2>/dev/null
read n < /tmp/n; echo "running=$n"`)
	s.RunAs = &compute.HostUser{UID: 4343, GID: 4343}
	s.Limits.MaxProcs = 20
	s.Limits.Timeout = 60e9
	exit, out, errs := runSpec(t, p, s)
	t.Logf("exit %+v stdout %q", exit, out)
	var running int
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "running="); ok {
			running = atoiOr(v, -1)
		}
	}
	if running <= 0 || running > 20 {
		t.Errorf("%d processes ran under max_procs 20 (stderr %q)", running, errs)
	}
}

// The attack: a memory hog. The memory limit kills it.
func TestProvider_MemoryLimit(t *testing.T) {
	engine(t)
	p := newTestProvider(t, Options{})
	id := testID(t)
	s := compute.Spec{
		ID:    id,
		RunAs: testUser(id),
		Argv:  []string{DefaultShimPath, "probe-alloc"},
		Binds: []compute.Bind{selfBind(t)},
		Env:   []string{"PATH=/bin"},
	}
	s.Limits.Memory = 64 << 20
	exit, out, errs := runSpec(t, p, s)
	if exit.Code == 0 || strings.Contains(out, "allocated") {
		t.Errorf("a 256 MiB allocation under a 64 MiB limit ended %+v, stdout %q stderr %q", exit, out, errs)
	}
	if exit.Signal != "killed" {
		t.Logf("ended %+v (not SIGKILL: the runtime may have failed its own allocation first)", exit)
	}
	// Control: with room, the same probe completes, so the limit is what stopped it. The
	// room is generous: under -race the probe's shadow memory counts too.
	s.ID = testID(t)
	s.Limits.Memory = 3 << 30
	exit, out, _ = runSpec(t, p, s)
	if exit.Code != 0 || !strings.Contains(out, "allocated 256 MiB") {
		t.Errorf("control run under 3 GiB ended %+v, stdout %q", exit, out)
	}
}

// runscHost is the engine whose default runtime is runsc: podman's Docker API ignores the
// runtime a container asks for, so scripts/podman.sh serves a second socket for gVisor when
// it finds runsc (on PATH, or built by scripts/gvisor-tools.sh into .cache/gvisor/bin).
func runscHost(t *testing.T) string {
	t.Helper()
	engine(t)
	host := os.Getenv("DOCKER_HOST_RUNSC")
	if host == "" {
		host = "unix:///run/agora-podman-runsc.sock"
	}
	if _, err := os.Stat(strings.TrimPrefix(host, "unix://")); err != nil {
		t.Skipf("SKIP: no runsc (gVisor) engine at %s: run scripts/gvisor-tools.sh, then scripts/podman.sh", host)
	}
	return host
}

func TestProvider_Runsc(t *testing.T) {
	host := runscHost(t)
	p := newTestProvider(t, Options{Runtime: RuntimeRunsc, Host: host})
	s := shSpec(t, `echo "kernel=$(uname -r)"; cat <&3; echo; id -u; cat /proc/self/status | grep CapEff`)
	rw := writableDir(t, int(s.RunAs.UID), int(s.RunAs.GID))
	r, w := pipeWith(t, "gvisor-secret")
	_ = w
	s.Files = append(s.Files, r)
	s.Binds = append(s.Binds, compute.Bind{Src: rw, Dst: "/rw", Writable: true})
	exit, out, errs := runSpec(t, p, s)
	if exit.Code != 0 {
		t.Fatalf("exit %+v: %s %s", exit, out, errs)
	}
	kernel, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	// gVisor's Sentry answers for the kernel: not the host's release.
	if strings.Contains(out, "kernel="+strings.TrimSpace(string(kernel))+"\n") {
		t.Errorf("the container saw the host's kernel %s: not gVisor", kernel)
	}
	for _, want := range []string{"gvisor-secret\n", fmt.Sprintf("\n%d\n", s.RunAs.UID), "CapEff:\t0000000000000000"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if !strings.HasSuffix(exit.Isolation, "+runsc") {
		t.Errorf("isolation %q lacks +runsc", exit.Isolation)
	}
}
