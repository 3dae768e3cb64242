package worker

// Attacks on the signal drop's timing: Main drops the signals on a goroutine beside verify,
// and runner.steps waits for it (options.awaitSignals) right after verify. The claim under
// attack: nothing but the worker runs before that wait, so no process can signal the
// worker in the window, and everything after the wait (setup scripts, git, the agent) finds
// the signals dropped.
//
// The process tests run the worker in a child process (this test binary, re-executed with
// r47sChildEnv: init below takes it over before TestMain) under a seccomp filter that kills the
// child (SIGSYS) on any fork, vfork, execve or clone that is not a thread: a process started
// anywhere before the wait, however briefly, ends the child with SIGSYS instead of its
// report. The filter cannot be lifted, so a child that reaches the wait exits there.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// Environment of the child process.
const (
	r47sChildEnv   = "AGORA_TEST_REDTEAM47S_CHILD" // the mode: see r47sChild
	r47sRootEnv    = "AGORA_TEST_REDTEAM47S_ROOT"
	r47sTmpEnv     = "AGORA_TEST_REDTEAM47S_TMP"
	r47sSeccompEnv = "AGORA_TEST_REDTEAM47S_SECCOMP" // "strict", "probe" (Go's pidfd probe allowed), "" none
	// r47sReachedWait is what a child prints when the worker reaches awaitSignals.
	r47sReachedWait = "REDTEAM47S: reached the wait"
)

func init() {
	if mode := os.Getenv(r47sChildEnv); mode != "" {
		os.Exit(r47sChild(mode))
	}
}

// r47sChild is the child's body:
//
//	run-wait  run() with an awaitSignals that prints r47sReachedWait and exits 0
//	run-full  run() with an awaitSignals that returns (the control: the setup and agent fork)
//	main      the real Main, with AGORA_WORKER_ROOT set by the parent
func r47sChild(mode string) int {
	if f := os.Getenv(r47sSeccompEnv); f != "" {
		if err := r47sNoProcesses(f == "probe"); err != nil {
			fmt.Fprintf(os.Stderr, "REDTEAM47S: seccomp: %v\n", err)
			return 97
		}
	}
	root, tmp := os.Getenv(r47sRootEnv), os.Getenv(r47sTmpEnv)
	switch mode {
	case "run-wait":
		return run(context.Background(), options{Root: root, TempDir: tmp, Stderr: os.Stderr,
			awaitSignals: func() {
				fmt.Println(r47sReachedWait)
				os.Exit(0)
			}})
	case "run-full":
		return run(context.Background(), options{Root: root, TempDir: tmp, Stderr: os.Stderr,
			awaitSignals: func() { fmt.Println(r47sReachedWait) }})
	case "main":
		return Main(context.Background(), os.Stdout, os.Stderr)
	}
	fmt.Fprintf(os.Stderr, "REDTEAM47S: unknown mode %q\n", mode)
	return 98
}

// r47sNoProcesses installs, on every thread (TSYNC), a seccomp filter that kills the process
// on fork, vfork, execve, execveat and any clone without CLONE_THREAD; clone3 fails ENOSYS,
// so glibc's pthread_create (the race detector's threads) falls back to clone. With
// allowProbe, a clone with CLONE_VFORK and no exit signal is let through: Go's pidfd probe
// (syscall.doCheckClonePidfd), whose child does nothing but exit_group; os/exec's own clone
// always carries SIGCHLD.
func r47sNoProcesses(allowProbe bool) error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("the filter is written for amd64, not %s", runtime.GOARCH)
	}
	const (
		ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		kill  = unix.SECCOMP_RET_KILL_PROCESS
		allow = unix.SECCOMP_RET_ALLOW
	)
	probe := uint32(kill)
	if allowProbe {
		probe = allow
	}
	// Jumps are relative to the next instruction; the returns are 13 to 17.
	prog := []unix.SockFilter{
		/* 0 */ {Code: ldW, K: 4}, // arch
		/* 1 */ {Code: jeq, K: unix.AUDIT_ARCH_X86_64, Jt: 0, Jf: 11}, // -> 13 kill
		/* 2 */ {Code: ldW, K: 0}, // nr
		/* 3 */ {Code: jeq, K: unix.SYS_CLONE3, Jt: 12, Jf: 0}, // -> 16 ENOSYS
		/* 4 */ {Code: jeq, K: unix.SYS_FORK, Jt: 8, Jf: 0}, // -> 13 kill
		/* 5 */ {Code: jeq, K: unix.SYS_VFORK, Jt: 7, Jf: 0}, // -> 13 kill
		/* 6 */ {Code: jeq, K: unix.SYS_EXECVE, Jt: 6, Jf: 0}, // -> 13 kill
		/* 7 */ {Code: jeq, K: unix.SYS_EXECVEAT, Jt: 5, Jf: 0}, // -> 13 kill
		/* 8 */ {Code: jeq, K: unix.SYS_CLONE, Jt: 0, Jf: 5}, // -> 14 allow
		/* 9 */ {Code: ldW, K: 16}, // args[0], the flags (low half)
		/* 10 */ {Code: jset, K: unix.CLONE_THREAD, Jt: 3, Jf: 0}, // -> 14 allow
		/* 11 */ {Code: jset, K: 0xff, Jt: 3, Jf: 0}, // an exit signal: a process -> 15 kill
		/* 12 */ {Code: jset, K: unix.CLONE_VFORK, Jt: 4, Jf: 0}, // -> 17 probe, else 13 kill
		/* 13 */ {Code: ret, K: kill},
		/* 14 */ {Code: ret, K: allow},
		/* 15 */ {Code: ret, K: kill},
		/* 16 */ {Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		/* 17 */ {Code: ret, K: probe},
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	const setModeFilter, flagTsync = 1, 1
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, setModeFilter, flagTsync, uintptr(unsafe.Pointer(&fp))); e != 0 {
		return e
	}
	return nil
}

// r47sRun runs the child in mode over the fixture and returns its stdout, stderr and exit.
func r47sRun(t *testing.T, f *fixture, mode, filter string, extraEnv []string, extra []*os.File) (string, string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.tmp,
		r47sChildEnv + "=" + mode, r47sRootEnv + "=" + f.root, r47sTmpEnv + "=" + f.tmp,
		r47sSeccompEnv + "=" + filter}, extraEnv...)
	if g := os.Getenv("GORACE"); g != "" {
		cmd.Env = append(cmd.Env, "GORACE="+g)
	}
	cmd.ExtraFiles = extra
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// r47sKilledBySIGSYS reports whether err is a child killed by the filter.
func r47sKilledBySIGSYS(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGSYS
}

// r47sFullFixture has a setup script, an overlay file and a git checkout: every step after
// the wait has something to do, and the setup script and the agent leave marks.
func r47sFullFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, `echo agent > agent-ran.txt`)
	f.caps = []testCap{
		{name: "shell", yaml: "commands:\n  - sh -c *\noverlay: [OVERLAID.md]\n",
			files: map[string]string{"OVERLAID.md": "overlaid\n"}},
		setupCap("echo setup > setup-ran.txt\n"),
	}
	initRepo(t, f.ws(), map[string]string{"README": "repo\n"})
	f.write()
	return f
}

// TestRedteam47s_NoProcessBeforeTheWait (attack: a process in the sandbox before the wait,
// started by Main's or verify's code: a helper, git, anything of the bundle). The worker runs
// up to the wait under the no-process filter and reaches it alive. Control: the same run past
// the wait is killed by the filter (the setup script's fork), so the filter bites.
func TestRedteam47s_NoProcessBeforeTheWait(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("SKIP: the seccomp filter is written for amd64, not %s", runtime.GOARCH)
	}
	f := r47sFullFixture(t)
	out, errOut, err := r47sRun(t, f, "run-wait", "strict", nil, nil)
	if err != nil || !strings.Contains(out, r47sReachedWait) {
		t.Fatalf("the worker did not reach the wait without starting a process (SIGSYS: %v): %v\nstdout:\n%s\nstderr:\n%s",
			r47sKilledBySIGSYS(err), err, out, errOut)
	}
	for _, p := range []string{f.ws("setup-ran.txt"), f.ws("agent-ran.txt"), f.ws("OVERLAID.md"), f.outPath(wire.ResultFile)} {
		if exists(p) {
			t.Errorf("%s exists at the wait", p)
		}
	}

	g := r47sFullFixture(t)
	out, errOut, err = r47sRun(t, g, "run-full", "strict", nil, nil)
	if !r47sKilledBySIGSYS(err) || !strings.Contains(out, r47sReachedWait) {
		t.Fatalf("control: a run past the wait was not killed by the filter after the wait: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if exists(g.ws("setup-ran.txt")) || !exists(g.ws("OVERLAID.md")) {
		t.Errorf("control: want the filter to end the run at the setup script, after the overlay")
	}
}

// TestRedteam47s_RefusedBundleStartsNothing (attack: the failure path skips the wait; does
// anything after it, writeResult or cleanup, start a process with the signals maybe not yet
// dropped?). A bundle verify refuses, through the real Main (cold, and warm with a claim
// pipe), under the no-process filter: Main exits 0 having written a failed result, and the
// only clone is Go's pidfd probe (warm slot warm-up, before the claim), whose child runs
// nothing. Without that allowance the warm path is killed: the warm-up's probe is a child
// process, only one that cannot run anything.
func TestRedteam47s_RefusedBundleStartsNothing(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("SKIP: the seccomp filter is written for amd64, not %s", runtime.GOARCH)
	}
	refused := func(t *testing.T) *fixture {
		f := r47sFullFixture(t)
		if err := os.WriteFile(filepath.Join(f.root, wire.BundleDir, wire.ManifestFile), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	claimPipe := func(t *testing.T) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		w.Close()
		t.Cleanup(func() { r.Close() })
		return r
	}
	for _, c := range []struct {
		name, filter string
		warm         bool
		wantSIGSYS   bool
	}{
		{"cold strict", "strict", false, false},
		{"warm probe allowed", "probe", true, false},
		{"warm strict", "strict", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := refused(t)
			env := []string{wire.RootEnv + "=" + f.root, "PWD=" + f.root}
			var extra []*os.File
			if c.warm {
				extra = []*os.File{nil, claimPipe(t)} // the claim on fd 4, fd 3 closed
				env = append(env, wire.ClaimFDEnv+"=4")
			}
			out, errOut, err := r47sRun(t, f, "main", c.filter, env, extra)
			if c.wantSIGSYS {
				if !r47sKilledBySIGSYS(err) {
					t.Fatalf("want the warm-up's pidfd probe killed by the strict filter, got %v\n%s", err, errOut)
				}
				return
			}
			if err != nil {
				t.Fatalf("Main on a refused bundle: %v (SIGSYS: %v)\nstdout:\n%s\nstderr:\n%s", err, r47sKilledBySIGSYS(err), out, errOut)
			}
			res, perr := wire.ParseResult([]byte(readFile(t, f.outPath(wire.ResultFile))))
			if perr != nil || res.Status != wire.StatusFailed || len(res.Phases) != 1 || res.Phases[0].Name != wire.PhaseVerify {
				t.Fatalf("result %+v (%v), want failed at verify", res, perr)
			}
		})
	}
}

// TestRedteam47s_WaitBeforeSecretsAndEveryStep (attack: a step after verify that goes before
// the wait): at the wait the secrets descriptor is unread, the overlay, the setup script's
// mark, the baseline's git directory, the agent's mark and the result are all absent; the wait
// is made once; afterwards every step ran.
func TestRedteam47s_WaitBeforeSecretsAndEveryStep(t *testing.T) {
	f := r47sFullFixture(t)
	f.man.SecretKeys = []string{"TOKEN"}
	f.writeManifest()
	f.withSecrets(`{"TOKEN":"s3cret"}`)
	tmpBefore, err := os.ReadDir(f.tmp)
	if err != nil {
		t.Fatal(err)
	}
	var atWait []string
	calls := 0
	await := func() {
		calls++
		if n, err := unix.IoctlGetInt(int(f.secrets.Fd()), unix.TIOCINQ); err != nil || n != len(`{"TOKEN":"s3cret"}`) {
			atWait = append(atWait, fmt.Sprintf("secrets pipe holds %d bytes (%v)", n, err))
		}
		for _, p := range []string{f.ws("OVERLAID.md"), f.ws("setup-ran.txt"), f.ws("agent-ran.txt"), f.outPath(wire.ResultFile)} {
			if exists(p) {
				atWait = append(atWait, p+" exists")
			}
		}
		if now, _ := os.ReadDir(f.tmp); len(now) != len(tmpBefore) {
			atWait = append(atWait, fmt.Sprintf("TempDir has %d entries, had %d (the baseline's git dir?)", len(now), len(tmpBefore)))
		}
	}
	code := run(t.Context(), options{Root: f.root, TempDir: f.tmp, SecretsFile: f.secrets, Stderr: &f.stderr, awaitSignals: await})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, f.stderr.String())
	}
	if calls != 1 || len(atWait) != 0 {
		t.Fatalf("waited %d times; at the wait: %q", calls, atWait)
	}
	res, err := wire.ParseResult([]byte(readFile(t, f.outPath(wire.ResultFile))))
	if err != nil || res.Status != wire.StatusOK {
		t.Fatalf("result %+v %v; stderr %s", res, err, f.stderr.String())
	}
	for _, p := range []string{f.ws("OVERLAID.md"), f.ws("setup-ran.txt"), f.ws("agent-ran.txt")} {
		if !exists(p) {
			t.Errorf("%s missing after the run", p)
		}
	}
}

// TestRedteam47s_LaterFailureStillWaitedFirst: a run that fails at the first step after
// verify (secrets missing) has made the wait before it, once.
func TestRedteam47s_LaterFailureStillWaitedFirst(t *testing.T) {
	f := newFixture(t, "true")
	f.man.SecretKeys = []string{"TOKEN"}
	f.write()
	var order []string
	r := run(t.Context(), options{Root: f.root, TempDir: f.tmp, awaitSignals: func() { order = append(order, "wait") }})
	if r != 0 {
		t.Fatalf("exit %d", r)
	}
	res, err := wire.ParseResult([]byte(readFile(t, f.outPath(wire.ResultFile))))
	if err != nil {
		t.Fatal(err)
	}
	if got := phaseNames(res); len(order) != 1 || res.Status != wire.StatusFailed || strings.Join(got, ",") != wire.PhaseVerify+","+wire.PhaseSecrets {
		t.Fatalf("waits %q, status %s, phases %q: want one wait, failed at secrets", order, res.Status, got)
	}
}

// r47sSignaller sends the worker (its parent) every signal the worker drops, by number (sh's
// kill knows no STKFLT), then leaves mark.
func r47sSignaller(mark string) string {
	return `for s in 1 2 3 4 5 6 10 12 13 14 15 16 20 21 22 24 25 26 29 30 31; do kill -s $s $PPID 2>/dev/null || kill -$s $PPID || echo "$s" >> ` + mark + `.errors; done
echo survived > ` + mark + "\n"
}

// TestRedteam47s_RealMainSurvivesTheFirstProcess (attack: the earliest process of a run, the
// first setup script, signals the worker at once, before the goroutine could have dropped
// everything; the agent then does the same). Through the real Main, cold and warm (a claim
// pipe), in a child that is not PID 1, so every signal is delivered and only the drop saves
// it; GOMAXPROCS=1 so the drop's goroutine shares the one P with verify. Main exits 0 with an
// ok result and both marks, and under -race the child reports no race between the drop's
// goroutine and verify.
func TestRedteam47s_RealMainSurvivesTheFirstProcess(t *testing.T) {
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			f := newFixture(t, r47sSignaller("agent-survived.txt"))
			f.caps = append(f.caps, setupCap(r47sSignaller("setup-survived.txt")))
			initRepo(t, f.ws(), map[string]string{"README": "repo\n"})
			f.write()
			env := []string{wire.RootEnv + "=" + f.root, "PWD=" + f.root, "GOMAXPROCS=1"}
			var extra []*os.File
			if warm {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				w.Write([]byte{1})
				w.Close()
				extra = []*os.File{nil, r}
				env = append(env, wire.ClaimFDEnv+"=4")
			}
			out, errOut, err := r47sRun(t, f, "main", "", env, extra)
			if err != nil {
				t.Fatalf("the worker did not survive: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
			}
			res, perr := wire.ParseResult([]byte(readFile(t, f.outPath(wire.ResultFile))))
			if perr != nil || res.Status != wire.StatusOK {
				t.Fatalf("result %+v %v\n%s", res, perr, errOut)
			}
			for _, m := range []string{"setup-survived.txt", "agent-survived.txt"} {
				if readFile(t, f.ws(m)) != "survived\n" || exists(f.ws(m+".errors")) {
					t.Errorf("%s: a signal was not sent or the mark is missing", m)
				}
			}
		})
	}
}
