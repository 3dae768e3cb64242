package callerctx_test

// The hand-off proof (Prover) and the /proc comparison (Read, Differs).

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/callerctx"
	"golang.org/x/sys/unix"
)

const (
	// rt46hSeccompEnv makes this test binary install a seccomp filter ("allow": one that
	// allows everything; "deny-uname": one that fails uname(2) with EPERM), print "ready",
	// then wait for its stdin to close.
	rt46hSeccompEnv = "RT46H_SECCOMP"
	// rt46hForgeEnv ("PID:FD") makes this test binary try every way it knows to learn the
	// secret of the challenge at PID's FD without readlink of /proc/PID/fd/FD; it prints
	// everything it could read, then "END".
	rt46hForgeEnv = "RT46H_FORGE"
)

func init() {
	if how := os.Getenv(rt46hSeccompEnv); how != "" {
		if err := rt46hInstallSeccomp(how); err != nil {
			fmt.Printf("err %v\n", err)
			os.Exit(3)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if ch := os.Getenv(rt46hForgeEnv); ch != "" && os.Getenv(agoratest.LandlockEnv) == "" {
		rt46hForge(ch)
		os.Exit(0)
	}
}

// rt46hInstallSeccomp installs one seccomp filter on every thread of this process.
func rt46hInstallSeccomp(how string) error {
	const (
		bpfLD, bpfW, bpfABS  = 0x00, 0x00, 0x20
		bpfJMP, bpfJEQ, bpfK = 0x05, 0x10, 0x00
		bpfRET               = 0x06
		retAllow             = 0x7fff0000
		retErrno             = 0x00050000
		setModeFilter        = 1
		flagTsync            = 1
	)
	var prog []unix.SockFilter
	switch how {
	case "allow":
		prog = []unix.SockFilter{{Code: bpfRET | bpfK, K: retAllow}}
	case "deny-uname":
		prog = []unix.SockFilter{
			{Code: bpfLD | bpfW | bpfABS, K: 0},
			{Code: bpfJMP | bpfJEQ | bpfK, Jt: 0, Jf: 1, K: uint32(unix.SYS_UNAME)},
			{Code: bpfRET | bpfK, K: retErrno | uint32(unix.EPERM)},
			{Code: bpfRET | bpfK, K: retAllow},
		}
	default:
		return fmt.Errorf("unknown filter %q", how)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	runtime.LockOSThread()
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, setModeFilter, flagTsync, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: %v", errno)
	}
	return nil
}

// rt46hForge is the forger: everything of the taker it can read (but the readlink).
func rt46hForge(ch string) {
	pid, fd, _ := strings.Cut(ch, ":")
	proc := "/proc/" + pid
	say := func(what string, b []byte, err error) {
		if err != nil {
			fmt.Printf("%s: ERR %v\n", what, err)
			return
		}
		fmt.Printf("%s: %q\n", what, b)
	}
	for _, f := range []string{"fdinfo/" + fd, "maps", "smaps", "status", "stat", "cmdline", "comm", "environ", "io", "mountinfo", "net/unix", "syscall", "stack", "wchan", "sched", "numa_maps", "personality"} {
		b, err := os.ReadFile(proc + "/" + f)
		say(f, b, err)
	}
	// Opening the descriptor (not readlink), and reading through it.
	if f, err := os.Open(proc + "/fd/" + fd); err == nil {
		b, _ := io.ReadAll(f)
		l, lerr := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
		say("open fd", []byte(l+" "+string(b)), lerr)
		f.Close()
	} else {
		say("open fd", nil, err)
	}
	// The directory listings, the threads', map_files.
	for _, d := range []string{"fd", "fdinfo", "map_files", "task"} {
		es, err := os.ReadDir(proc + "/" + d)
		names := []string{}
		for _, e := range es {
			names = append(names, e.Name())
		}
		say("ls "+d, []byte(strings.Join(names, " ")), err)
		if d == "task" {
			for _, tid := range names {
				l, err := os.Readlink(proc + "/task/" + tid + "/fd/" + fd)
				say("task "+tid+" fd", []byte(l), err)
			}
		}
	}
	// pidfd_getfd: a copy of the taker's descriptor.
	if pfd, err := unix.PidfdOpen(atoiOr(pid), 0); err == nil {
		nfd, err := unix.PidfdGetfd(pfd, atoiOr(fd), 0)
		if err == nil {
			l, lerr := os.Readlink("/proc/self/fd/" + strconv.Itoa(nfd))
			say("pidfd_getfd", []byte(l), lerr)
		} else {
			say("pidfd_getfd", nil, err)
		}
	} else {
		say("pidfd_open", nil, err)
	}
	// process_vm_readv of the taker's memory: would hold the secret in the heap.
	buf := make([]byte, 16)
	local := []unix.Iovec{{Base: &buf[0], Len: 16}}
	remote := []unix.RemoteIovec{{Base: 0x400000, Len: 16}}
	_, err := unix.ProcessVMReadv(atoiOr(pid), local, remote, 0)
	say("process_vm_readv", buf, err)
	// /proc/PID/mem: the taker's heap holds the secret (the challenge's string, the memfd's
	// name as built). Every "agora-handoff-proof-<64 hex>" found is printed.
	if mem, err := os.Open(proc + "/mem"); err != nil {
		say("mem", nil, err)
	} else {
		maps, _ := os.ReadFile(proc + "/maps")
		found := map[string]bool{}
		for _, line := range strings.Split(string(maps), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || !strings.HasPrefix(f[1], "rw") {
				continue
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			a, _ := strconv.ParseUint(lo, 16, 64)
			b, _ := strconv.ParseUint(hi, 16, 64)
			for off := a; off < b; off += 1 << 20 {
				n := min(b-off, 1<<20)
				buf := make([]byte, n)
				if k, _ := mem.ReadAt(buf, int64(off)); k > 0 {
					for _, m := range rt46hSecretRE.FindAll(buf[:k], -1) {
						found[string(m)] = true
					}
				}
			}
		}
		mem.Close()
		for m := range found {
			fmt.Printf("mem: %s\n", m)
		}
		say("mem", []byte(fmt.Sprint(len(found), " candidates")), nil)
	}
	fmt.Println("END")
}

var rt46hSecretRE = regexp.MustCompile(`[0-9a-f]{64}`)

func atoiOr(s string) int { n, _ := strconv.Atoi(s); return n }

// TestRedTeam46h_ProofReplayAndRace: an answered proof is refused again; one issued to
// another pid is refused even with the right secret; two hand-offs racing on one proof: at
// most one wins.
func TestRedTeam46h_ProofReplayAndRace(t *testing.T) {
	var p callerctx.Prover
	now := time.Now()
	me := int32(os.Getpid())
	fd, err := p.Issue(me, now)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := callerctx.Answer(me, fd)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(me, fd, secret, now); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(me, fd, secret, now); err == nil {
		t.Error("replayed proof accepted")
	}
	// The fd number is reused by the next challenge: the old secret must not fit it.
	fd2, err := p.Issue(me, now)
	if err != nil {
		t.Fatal(err)
	}
	if fd2 == fd {
		t.Logf("the next challenge reuses descriptor %d", fd)
	}
	if err := p.Check(me, fd2, secret, now); err == nil {
		t.Error("an old secret answered the challenge now at the same descriptor")
	}
	// Issued to a helper (another pid), sent by this process.
	fd, _ = p.Issue(me+7, now)
	secret, _ = callerctx.Answer(me, fd)
	if err := p.Check(me, fd, secret, now); err == nil {
		t.Error("a proof issued to another pid was accepted from this one")
	}
	// The race.
	for range 50 {
		fd, _ := p.Issue(me, now)
		secret, _ := callerctx.Answer(me, fd)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if p.Check(me, fd, secret, now) == nil {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() > 1 {
			t.Fatalf("one proof won %d racing hand-offs", wins.Load())
		}
	}
}

// TestRedTeam46h_OtherPeerCannotBurnChallenge: a challenge is used up by ANY answer at its
// descriptor, even one from a process it was not issued to. Another same-user process
// (confined or not) that sends proof_fd=N for small N burns the challenges of legitimate
// CLIs waiting between their two requests: they are declined and run in-process.
// Availability only. Secure: a wrong peer's answer leaves the challenge to its own peer.
func TestRedTeam46h_OtherPeerCannotBurnChallenge(t *testing.T) {
	var p callerctx.Prover
	now := time.Now()
	me := int32(os.Getpid())
	fd, err := p.Issue(me, now)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := callerctx.Answer(me, fd)
	_ = p.Check(me+1, fd, "", now) // the attacker's guess, from another pid
	if err := p.Check(me, fd, secret, now); err != nil {
		t.Errorf("another process burned this process's challenge by answering at its descriptor: %v", err)
	}
}

// TestRedTeam46h_MalformedChecks: nothing panics, nothing passes.
func TestRedTeam46h_MalformedChecks(t *testing.T) {
	var p callerctx.Prover
	now := time.Now()
	me := int32(os.Getpid())
	fd, _ := p.Issue(me, now)
	secret, _ := callerctx.Answer(me, fd)
	for name, c := range map[string]struct {
		fd     int
		secret string
	}{
		"negative":    {-1, secret},
		"huge":        {1 << 62, secret},
		"empty":       {fd, ""},
		"prefix":      {fd, secret[:63]},
		"longer":      {fd, secret + "0"},
		"10MB":        {fd, strings.Repeat("a", 10<<20)},
		"upper-cased": {fd, strings.ToUpper(secret)},
	} {
		if err := p.Check(me, c.fd, c.secret, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
		fd, _ = p.Issue(me, now)
		secret, _ = callerctx.Answer(me, fd)
	}
	for _, c := range []struct {
		pid int32
		fd  int
	}{{0, 0}, {-1, 3}, {me, -5}, {me, 1 << 40}, {1, 0}} {
		if s, err := callerctx.Answer(c.pid, c.fd); err == nil {
			t.Errorf("Answer(%d, %d) = %q", c.pid, c.fd, s)
		}
	}
}

// TestRedTeam46h_ForgeWithoutReadlink: a Landlock-confined process, and one without
// capabilities, try every other way to read the secret of a challenge of this process:
// fdinfo, maps, the listings, threads' fd, open(), pidfd_getfd, process_vm_readv. None may
// show it. Also: a child of the taker does not inherit the memfd.
func TestRedTeam46h_ForgeWithoutReadlink(t *testing.T) {
	requireRoot(t)
	var p callerctx.Prover
	self, _ := os.Executable()
	me := os.Getpid()
	run := func(name string, mk func(env []string) *exec.Cmd) {
		t.Run(name, func(t *testing.T) {
			fd, err := p.Issue(0, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			secret, _ := callerctx.Answer(int32(me), fd)
			env := append(os.Environ(), fmt.Sprintf("%s=%d:%d", rt46hForgeEnv, me, fd))
			cmd := mk(env)
			out, err := cmd.CombinedOutput()
			if !strings.Contains(string(out), "END") {
				t.Fatalf("the forger did not finish: %v\n%s", err, out)
			}
			t.Logf("forger (%s) saw:\n%s", name, out)
			if strings.Contains(string(out), secret) {
				t.Errorf("the %s forger learnt the secret without readlink", name)
			}
		})
	}
	run("landlock", func(env []string) *exec.Cmd {
		if why := agoratest.LandlockAvailable(); why != "" {
			t.Skip("SKIP: " + why)
		}
		return agoratest.LandlockCommand([]string{"/"}, env, self)
	})
	run("no capabilities", func(env []string) *exec.Cmd {
		c := exec.Command("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--", self)
		c.Env = env
		return c
	})
	// CLOEXEC: a child of the taker never holds a challenge.
	fd, _ := p.Issue(0, time.Now())
	out, _ := exec.Command("readlink", "/proc/self/fd/"+strconv.Itoa(fd)).CombinedOutput()
	if strings.Contains(string(out), "agora-handoff-proof") {
		t.Errorf("a child of the taker inherited the challenge: %s", out)
	}
}

// rt46hSeccompChild starts this binary under the seccomp filter how; it lives until stop.
func rt46hSeccompChild(t *testing.T, how string) (pid int, stop func()) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), rt46hSeccompEnv+"="+how)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		stdin.Close()
		cmd.Wait()
		t.Skipf("SKIP: no seccomp filter here: %q", line)
	}
	return cmd.Process.Pid, func() { stdin.Close(); cmd.Wait() }
}

// TestRedTeam46h_SeccompFilters: a caller with a seccomp filter the taker lacks differs
// (held). A caller under a DIFFERENT filter than the taker's, of the same count, must differ
// too: /proc shows only the mode and the number of filters, and ptrace_may_access does not
// look at seccomp at all, so neither check sees which syscalls the caller was denied.
func TestRedTeam46h_SeccompFilters(t *testing.T) {
	requireRoot(t)
	own, err := callerctx.Read(0)
	if err != nil {
		t.Fatal(err)
	}
	allowPid, stopA := rt46hSeccompChild(t, "allow")
	defer stopA()
	denyPid, stopD := rt46hSeccompChild(t, "deny-uname")
	defer stopD()
	allow, err := callerctx.Read(allowPid)
	if err != nil {
		t.Fatal(err)
	}
	deny, err := callerctx.Read(denyPid)
	if err != nil {
		t.Fatal(err)
	}
	if d := allow.Differs(own); !strings.Contains(d, "seccomp") {
		t.Errorf("a caller with a seccomp filter the taker lacks: differs %q", d)
	}
	// The taker runs under "allow" (a service manager's filter), the caller under
	// "deny-uname" (an agent sandbox's): one filter each.
	if d := deny.Differs(allow); d == "" {
		t.Errorf("a caller whose seccomp filter denies uname(2) is indistinguishable from a taker whose filter allows everything (both Seccomp 2, Seccomp_filters %s): the hand-off would run the caller's work without its filter", deny.SeccompFilters)
	}
}
