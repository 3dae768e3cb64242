package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on a RunAs start, which switches its thread's real uid and gid to the sandbox
// user's for prlimit(2). These attacks use uids of their own (not testRunAs), so that a leftover
// process count is not confused with another package's test sandboxes.

// threadsNotRoot lists this process's threads whose real, effective, saved or fs ids are not 0.
func threadsNotRoot(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(Uid|Gid):\t(.*)$`)
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, e := range tids {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		m := re.FindAllStringSubmatch(string(b), -1)
		if len(m) != 2 || m[0][2] != "0\t0\t0\t0" || m[1][2] != "0\t0\t0\t0" {
			bad = append(bad, fmt.Sprintf("thread %s: %q", e.Name(), m))
		}
	}
	return bad
}

// processesOf lists the pids of host processes whose real uid is uid.
func processesOf(t *testing.T, uid uint32) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		if m := regexp.MustCompile(`(?m)^Uid:\t(\d+)\t`).FindStringSubmatch(string(b)); m != nil && m[1] == strconv.FormatUint(uint64(uid), 10) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestRedTeam28_RunAsLimitRefusedLeavesNoSandboxIDs: a limit prlimit(2) must refuse (a hard
// limit above the provider's own, which without CAP_SYS_RESOURCE cannot be raised) fails the
// start between the switch and the restore. The command never runs, no process of the
// sandbox user is left, no thread keeps the sandbox user's ids, and the next start works.
func TestRedTeam28_RunAsLimitRefusedLeavesNoSandboxIDs(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	var nproc unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &nproc); err != nil {
		t.Fatal(err)
	}
	if nproc.Max == unix.RLIM_INFINITY || nproc.Max > 1<<30 {
		t.Skip("SKIP: RLIMIT_NPROC's hard limit is unlimited here, so no MaxProcs is refused")
	}
	if capable(unix.CAP_SYS_RESOURCE) {
		t.Skip("SKIP: this process has CAP_SYS_RESOURCE, so prlimit(2) may raise a hard limit")
	}
	u := &compute.HostUser{UID: 0x70000000 + 2801, GID: 0x70000000 + 2801}
	p := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit"})
	dir := privateDir(t, u)
	for i := range 5 {
		var out, errOut syncBuffer
		_, err := p.Start(t.Context(), compute.Spec{
			ID: "refused" + strconv.Itoa(i), Argv: []string{"sh", "-c", "touch /rw/ran"}, Env: []string{"PATH=/usr/bin:/bin"},
			RunAs: u, Limits: compute.Limits{MaxProcs: int(nproc.Max) + 1}, Stdout: &out, Stderr: &errOut,
			Binds: []compute.Bind{{Src: filepath.Join(dir, "rw"), Dst: "/rw", Writable: true}},
		})
		if err == nil || !strings.Contains(err.Error(), "nproc") {
			t.Fatalf("Start with MaxProcs above the hard limit = %v, want the nproc limit refused", err)
		}
		if bad := threadsNotRoot(t); len(bad) > 0 {
			t.Fatalf("after a refused limit, threads keep non-root ids: %v", bad)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "rw", "ran")); err == nil {
		t.Fatal("the command ran although its limits were refused")
	}
	agoratest.WaitFor(t, 10*time.Second, "no process left of the sandbox user", func() bool { return len(processesOf(t, u.UID)) == 0 })
	r := run(t, p, compute.Spec{ID: "after", Argv: []string{"true"}, RunAs: u})
	if r.exit.Code != 0 {
		t.Fatalf("a start after refused ones = %+v\n%s", r.exit, r.stderr)
	}
}

// TestRedTeam28_RunAsConcurrentUIDs: starts of several sandbox users at once, each switching
// its own thread's real ids, must each get their limits: were the switch process-wide (as
// syscall.Setresuid is), one start's prlimit(2) would run with another's ids and fail, or a
// thread would be left with a sandbox user's ids.
func TestRedTeam28_RunAsConcurrentUIDs(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	p := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit"})
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n*3)
	for i := range n {
		u := &compute.HostUser{UID: uint32(0x70000000 + 2810 + i), GID: uint32(0x70000000 + 2810 + i)}
		wg.Go(func() {
			for j := range 3 {
				var out, errOut syncBuffer
				lim := compute.Limits{MaxProcs: 20 + i, FileSize: int64(1<<20 + i)}
				h, err := p.Start(t.Context(), compute.Spec{
					ID: fmt.Sprintf("c%d-%d", i, j), Argv: []string{"sh", "-c", "id -u; cat /proc/self/limits"},
					Env: []string{"PATH=/usr/bin:/bin"}, RunAs: u, Limits: lim, Stdout: &out, Stderr: &errOut,
				})
				if err != nil {
					errs <- fmt.Errorf("uid %d start %d: %w", u.UID, j, err)
					return
				}
				exit, err := h.Wait()
				if err != nil || exit.Code != 0 {
					errs <- fmt.Errorf("uid %d run %d: %+v %v: %s", u.UID, j, exit, err, errOut.String())
					return
				}
				for _, re := range []string{fmt.Sprintf(`(?m)^Max processes +%d +%d `, 20+i, 20+i), fmt.Sprintf(`(?m)^Max file size +%d +%d `, 1<<20+i, 1<<20+i)} {
					if !regexp.MustCompile(re).MatchString(out.String()) {
						errs <- fmt.Errorf("uid %d run %d: limits not %s:\n%s", u.UID, j, re, out.String())
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if bad := threadsNotRoot(t); len(bad) > 0 {
		t.Fatalf("threads keep non-root ids: %v", bad)
	}
}

// TestRedTeam28_RunAsCancelledMidStart: a start whose context ends at any moment (before,
// during or after the switch) either returns a running sandbox or an error; no thread keeps
// the sandbox user's ids and no process of that user is left once the handles are done.
func TestRedTeam28_RunAsCancelledMidStart(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	u := &compute.HostUser{UID: 0x70000000 + 2820, GID: 0x70000000 + 2820}
	p := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit"})
	var failed, ran int
	for i := range 12 {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Duration(i)*time.Millisecond, cancel)
		var out, errOut syncBuffer
		h, err := p.Start(ctx, compute.Spec{
			ID: "cancel" + strconv.Itoa(i), Argv: []string{"sleep", "30"}, Env: []string{"PATH=/usr/bin:/bin"},
			RunAs: u, Stdout: &out, Stderr: &errOut,
		})
		if err != nil {
			failed++
		} else {
			ran++
			_, _ = h.Wait() // the cancelled context kills it
		}
		cancel()
		if bad := threadsNotRoot(t); len(bad) > 0 {
			t.Fatalf("start %d: threads keep non-root ids: %v", i, bad)
		}
	}
	t.Logf("%d starts failed, %d ran and were killed", failed, ran)
	agoratest.WaitFor(t, 10*time.Second, "no process left of the sandbox user", func() bool { return len(processesOf(t, u.UID)) == 0 })
}

// TestRedTeam28_RunAsSandboxCannotReachProvider: the sandbox, running as the very user whose
// real ids the provider's thread takes on during the switch, cannot address the provider
// (kill(2)/tgkill need a pid it can name: it has a pid namespace of its own), cannot read its
// /proc, and cannot see any thread of it.
func TestRedTeam28_RunAsSandboxCannotReachProvider(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	u := &compute.HostUser{UID: 0x70000000 + 2830, GID: 0x70000000 + 2830}
	p := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit"})
	pid := os.Getpid()
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	fmt.Fprintf(&script, "kill -0 %d 2>/dev/null && echo REACHED pid; ", pid)
	fmt.Fprintf(&script, "cat /proc/%d/status 2>/dev/null | grep -q Name && echo REACHED proc; ", pid)
	for _, e := range tids {
		fmt.Fprintf(&script, "[ -e /proc/%s ] && echo REACHED tid %s; ", e.Name(), e.Name())
	}
	script.WriteString("ls /proc | grep -c '^[0-9]' ; echo done")
	r := run(t, p, compute.Spec{ID: "reach", Argv: []string{"sh", "-c", script.String()}, RunAs: u})
	if r.exit.Code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("probe = %+v\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "REACHED") {
		// A pid of the sandbox's namespace may collide with a low host tid; only a
		// collision with the provider's own pid is unambiguous.
		t.Errorf("the sandbox reached the provider:\n%s", r.stdout)
	}
}

// capable reports whether this process has cap in its effective set.
func capable(cap int) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	m := regexp.MustCompile(`(?m)^CapEff:\t([0-9a-f]+)$`).FindSubmatch(b)
	if m == nil {
		return false
	}
	v, err := strconv.ParseUint(string(m[1]), 16, 64)
	return err == nil && v&(1<<uint(cap)) != 0
}

// TestRedTeam28_SandboxNoneKeepsLimits: prlimit(1) is now needed by sandbox: none targets
// only; such a target (root's, run as a sandbox user) still gets every limit soft and hard,
// and without prlimit(1) it is refused rather than run unlimited.
func TestRedTeam28_SandboxNoneKeepsLimits(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat("/usr/bin/prlimit"); err != nil {
		t.Skip("SKIP: /usr/bin/prlimit is not installed (apt-get install util-linux)")
	}
	u := &compute.HostUser{UID: 0x70000000 + 2840, GID: 0x70000000 + 2840}
	none := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit", NoCgroup: true})
	if _, err := none.Start(t.Context(), compute.Spec{ID: "none", Argv: []string{"/bin/true"}, Sandbox: compute.SandboxNone, RunAs: u}); err == nil {
		t.Fatal("a sandbox: none start without prlimit(1) ran, want ErrNoPrlimit")
	}
	p := newProvider(t, Options{PrlimitPath: "/usr/bin/prlimit", NoCgroup: true})
	r := run(t, p, compute.Spec{ID: "none", Argv: []string{"/bin/cat", "/proc/self/limits"}, Sandbox: compute.SandboxNone, RunAs: u,
		Limits: compute.Limits{MaxProcs: 33, FileSize: 1 << 21}})
	for _, re := range []string{`(?m)^Max processes +33 +33 `, fmt.Sprintf(`(?m)^Max file size +%d +%d `, 1<<21, 1<<21), `(?m)^Max core file size +0 +0 `} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("sandbox: none limits not %s:\n%s\n%s", re, r.stdout, r.stderr)
		}
	}
}

// TestRedTeam28_RunAsUIDReusedAtOnce: a dispatch's uid may be leased again the moment its
// sandbox ends. A sandbox that leaves processes behind (backgrounded, in a new session, with
// SIGHUP ignored) must leave none of its user once Wait returns: one would be a process of the
// very uid whose real ids the next start's thread takes on, able to signal it during the switch.
// Each next start gets its own limits.
func TestRedTeam28_RunAsUIDReusedAtOnce(t *testing.T) {
	requireBwrap(t)
	requireRoot(t)
	u := &compute.HostUser{UID: 0x70000000 + 2850, GID: 0x70000000 + 2850}
	p := newProvider(t, Options{PrlimitPath: "/nonexistent/prlimit"})
	for i := range 6 {
		lim := compute.Limits{MaxProcs: 30 + i}
		r := run(t, p, compute.Spec{ID: "reuse" + strconv.Itoa(i), RunAs: u, Limits: lim, Argv: []string{"sh", "-c",
			"(trap '' HUP; setsid sleep 300 >/dev/null 2>&1 &); (nohup sleep 300 >/dev/null 2>&1 &); grep 'Max processes' /proc/self/limits; " +
				// Wait (up to 10 s: a loaded machine starts them late) until both are running.
				"for i in $(seq 200); do n=$(ls /proc/*/cmdline | xargs grep -l '^sleep' 2>/dev/null | wc -l); [ \"$n\" -ge 2 ] && break; sleep 0.05; done; echo sleepers=$n"}})
		if r.exit.Code != 0 {
			t.Fatalf("run %d = %+v\n%s", i, r.exit, r.stderr)
		}
		if want := fmt.Sprintf("%d", 30+i); !strings.Contains(r.stdout, want+" ") {
			t.Errorf("run %d: limits %q, want Max processes %s", i, r.stdout, want)
		}
		if !strings.Contains(r.stdout, "sleepers=2") {
			t.Fatalf("run %d: the two processes left behind did not start:\n%s", i, r.stdout)
		}
		if left := processesOf(t, u.UID); len(left) > 0 {
			t.Fatalf("run %d: processes of the sandbox user outlive Wait: %v", i, left)
		}
	}
}
