package container

import (
	"context"
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

// holdSpec is dispatch A of the nproc attacks: it forks sleepers until a fork fails (its
// nproc and pids limits are max), writes how many run to /rw/held, and holds them (its
// shell execs the last sleep: a fork would fail).
func holdSpec(t *testing.T, maxProcs int) (compute.Spec, string) {
	t.Helper()
	s := shSpec(t, `
( n=0; while [ $n -lt 100 ]; do sleep 120 & n=$((n+1)); echo $n > /tmp/n; done ) 2>/dev/null
read n < /tmp/n; echo $n > /rw/held; exec sleep 120`)
	rw := writableDir(t, int(s.RunAs.UID), int(s.RunAs.GID))
	s.Binds = append(s.Binds, compute.Bind{Src: rw, Dst: "/rw", Writable: true})
	s.Limits.MaxProcs = maxProcs
	s.Limits.Timeout = 3 * time.Minute
	return s, filepath.Join(rw, "held")
}

// startHolding starts A and waits until its sleepers run, returning how many; the test's end
// cancels it.
func startHolding(t *testing.T, p *Provider, s compute.Spec, held string) (compute.Handle, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	h, err := p.Start(ctx, s)
	if err != nil {
		cancel()
		t.Fatalf("start A: %v", err)
	}
	t.Cleanup(func() { cancel(); h.Wait() })
	// The shell creates the file before it writes the count (and can fork no mv to place it
	// whole): the count is there once its line ends.
	var b []byte
	if !agoratest.Poll(30*time.Second, func() bool {
		b, _ = os.ReadFile(held)
		return strings.HasSuffix(string(b), "\n")
	}) {
		t.Fatalf("A did not report its sleepers within 30 s (%q)", b)
	}
	return h, atoiOr(strings.TrimSpace(string(b)), -1)
}

// The attack: dispatch A forks up to its process limit and holds the processes.
// RLIMIT_NPROC counts per host uid, so were every container one uid, no other dispatch
// could fork. Each dispatch has its own uid: B, running meanwhile,
// still forks and completes. The control runs B as A's uid and must fail, which shows the
// limit really binds and the attack is real.
func TestLimits_NprocOfOneDispatchDoesNotStarveAnother(t *testing.T) {
	engine(t)
	p := newTestProvider(t, Options{})
	const maxProcs = 16
	a, held := holdSpec(t, maxProcs)
	_, n := startHolding(t, p, a, held)
	t.Logf("A (uid %d) holds %d sleepers under max_procs %d", a.RunAs.UID, n, maxProcs)
	if n < maxProcs-3 || n > maxProcs {
		t.Fatalf("A holds %d sleepers; want close to max_procs %d", n, maxProcs)
	}
	const forker = `sleep 0 & wait && echo forked=ok`
	b := shSpec(t, forker)
	b.Limits.MaxProcs = maxProcs
	if b.RunAs.UID == a.RunAs.UID {
		t.Fatalf("A and B were given the same uid %d", a.RunAs.UID)
	}
	exit, out, errs := runSpec(t, p, b)
	t.Logf("B (uid %d): exit %+v stdout %q stderr %q", b.RunAs.UID, exit, out, errs)
	if exit.Code != 0 || !strings.Contains(out, "forked=ok") {
		t.Errorf("B could not fork while A held its processes: exit %+v, stderr %q", exit, errs)
	}

	control := shSpec(t, forker)
	control.Limits.MaxProcs = maxProcs
	control.RunAs = a.RunAs
	exit, out, errs = runSpec(t, p, control)
	t.Logf("control as A's uid: exit %+v stdout %q stderr %q", exit, out, errs)
	if exit.Code == 0 || strings.Contains(out, "forked=ok") {
		t.Errorf("a container sharing A's uid forked anyway: the nproc limit does not bind, so the test proves nothing")
	}
}

// Two concurrent dispatches run as different host uids, and neither can see, read or signal
// the other's processes: B kills every process it may (kill -1), reads every /proc entry it
// sees, and A lives on.
func TestIsolation_ConcurrentDispatchesAreSeparateUsers(t *testing.T) {
	cli := engine(t)
	p := newTestProvider(t, Options{})
	a, held := holdSpec(t, 8)
	ha, _ := startHolding(t, p, a, held)
	b := shSpec(t, `
kill -9 -1 2>/dev/null; echo killed=$?
echo "procs=$(ls /proc | grep -c '^[0-9]')"
cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -c 'sleep 1[2]0' | sed 's/^/seen=/'`)
	exit, out, errs := runSpec(t, p, b)
	t.Logf("B: exit %+v stdout %q stderr %q", exit, out, errs)
	if !strings.Contains(out, "seen=0\n") {
		t.Errorf("B saw A's sleepers: %q", out)
	}
	// B's shell, ls and grep at most: nothing of A's.
	if procs := atoiOr(strings.TrimPrefix(lineWith(out, "procs="), "procs="), -1); procs < 1 || procs > 4 {
		t.Errorf("B sees %d processes; want only its own", procs)
	}
	// A is untouched by B's kill -1: still running.
	id, err := parseTaskID(ha.TaskID())
	if err != nil {
		t.Fatal(err)
	}
	ins, err := cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil || ins.Container.State == nil || !ins.Container.State.Running {
		t.Fatalf("A is no longer running after B's kill -1: %v", err)
	}
	// On the host, A's processes belong to A's uid alone: not B's, and not root's.
	if uid := hostUID(t, ins.Container.State.Pid); uid != a.RunAs.UID || uid == b.RunAs.UID {
		t.Errorf("A's pid 1 runs as host uid %d; A was given %d, B %d", uid, a.RunAs.UID, b.RunAs.UID)
	}
}

// hostUID reads the real uid of host process pid.
func hostUID(t *testing.T, pid int) uint32 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read A's status on the host: %v", err)
	}
	var uid uint32
	if _, err := fmt.Sscanf(strings.TrimPrefix(lineWith(string(b), "Uid:"), "Uid:"), "%d", &uid); err != nil {
		t.Fatalf("parse A's uid: %v", err)
	}
	return uid
}

// lineWith is the first line of s that starts with prefix, or "".
func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
