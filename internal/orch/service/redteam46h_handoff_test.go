package service_test

// The hand-off's caller check (callerWidens, the proof) against serve.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/peercred"
	"golang.org/x/sys/unix"
)

const (
	// rt46hSeccompExec ("allow" or "deny-uname") makes this test binary install that
	// seccomp filter on every thread and exec os.Args[1:] (the variable removed).
	rt46hSeccompExec = "RT46H_SECCOMP_EXEC"
	// rt46hSendEnv makes this test binary write the raw HTTP request in the variable to
	// descriptor 3 (a connection it inherited), print the answer and exit.
	rt46hSendEnv = "RT46H_SEND"
)

func init() {
	if how := os.Getenv(rt46hSeccompExec); how != "" {
		if err := rt46hSeccomp(how); err != nil {
			fmt.Fprintln(os.Stderr, "rt46h seccomp:", err)
			os.Exit(125)
		}
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, rt46hSeccompExec+"=") })
		path, err := exec.LookPath(os.Args[1])
		if err == nil {
			err = syscall.Exec(path, os.Args[1:], env)
		}
		fmt.Fprintln(os.Stderr, "rt46h exec:", err)
		os.Exit(125)
	}
	if req := os.Getenv(rt46hSendEnv); req != "" && os.Getenv(agoratest.LandlockEnv) == "" {
		c := os.NewFile(3, "conn")
		c.Write([]byte(req))
		b, _ := io.ReadAll(io.LimitReader(c, 64<<10))
		os.Stdout.Write(b)
		os.Exit(0)
	}
}

func rt46hSeccomp(how string) error {
	const (
		ldWAbs, jeqK, retK = 0x20, 0x15, 0x06
		retAllow, retErrno = 0x7fff0000, 0x00050000
	)
	var prog []unix.SockFilter
	switch how {
	case "allow":
		prog = []unix.SockFilter{{Code: retK, K: retAllow}}
	case "deny-uname":
		prog = []unix.SockFilter{
			{Code: ldWAbs, K: 0},
			{Code: jeqK, Jt: 0, Jf: 1, K: uint32(unix.SYS_UNAME)},
			{Code: retK, K: retErrno | uint32(unix.EPERM)},
			{Code: retK, K: retAllow},
		}
	default:
		return fmt.Errorf("unknown filter %q", how)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	runtime.LockOSThread()
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, 1 /* SET_MODE_FILTER */, 1 /* TSYNC */, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}

// rt46hServeUnder starts `agora orch serve` through wrapper (a command that execs its
// arguments: same pid) with extra environment, and waits until it answers.
func rt46hServeUnder(t *testing.T, e *env, extraEnv []string, wrapper ...string) *exec.Cmd {
	t.Helper()
	argv := append(slices.Clone(wrapper), agoraBin, "orch", "serve")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(slices.Clone(e.vars), extraEnv...)
	log, err := os.OpenFile(filepath.Join(e.home, "..", "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	must(t, err)
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	must(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	c := e.client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if h, err := c.Health(t.Context()); err == nil && h.PID == cmd.Process.Pid {
			return cmd
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
			t.Fatalf("serve (under %v) did not answer within 30s:\n%s", wrapper, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rt46hCLI runs `agora dispatch run ARGS` through wrapper, with extra environment.
func rt46hCLI(t *testing.T, e *env, extraEnv []string, wrapper []string, args ...string) (code int, out, errOut string) {
	t.Helper()
	argv := append(slices.Clone(wrapper), agoraBin, "dispatch", "run")
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(slices.Clone(e.vars), extraEnv...)
	var o, eo strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &eo
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, o.String(), eo.String()
}

func rt46hSelf(t *testing.T) string {
	self, err := os.Executable()
	must(t, err)
	return self
}

func rt46hRequireRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIP: needs root")
	}
}

const unameYAML = "runtime: exec\ncommand: [sh, -c, 'uname -s && echo UNAME-WORKED']\ncapabilities: [shell]\n"

// TestRedTeam46h_SeccompCaller: a CLI under a seccomp filter serve lacks is declined (held).
func TestRedTeam46h_SeccompCaller(t *testing.T) {
	rt46hRequireRoot(t)
	e, _ := handoffEnv(t)
	e.applySubagents(map[string]string{"uname": unameYAML})
	code, out, stderr := rt46hCLI(t, e, []string{rt46hSeccompExec + "=deny-uname"}, []string{rt46hSelf(t)}, "--subagent", "uname")
	t.Logf("exit %d\n%s%s", code, out, stderr)
	if e.handoffs() != 0 {
		t.Errorf("serve took the dispatch of a CLI under a seccomp filter it lacks")
	}
	if strings.Contains(out+stderr, "UNAME-WORKED") {
		t.Errorf("the CLI's dispatch ran a syscall its own seccomp filter denies")
	}
}

// TestRedTeam46h_SeccompSameCountOtherFilter: serve under one seccomp filter (a service
// manager's, here one that allows all), the CLI under another one (an agent sandbox's, here
// one that denies uname(2)). /proc shows both as "Seccomp: 2, Seccomp_filters: 1", and the
// proof's ptrace check ignores seccomp: serve must still decline, or the dispatch runs
// without the CLI's filter.
func TestRedTeam46h_SeccompSameCountOtherFilter(t *testing.T) {
	rt46hRequireRoot(t)
	requireBwrap(t)
	e := newEnv(t)
	e.applySubagents(map[string]string{"uname": unameYAML})
	self := rt46hSelf(t)
	rt46hServeUnder(t, e, []string{rt46hSeccompExec + "=allow"}, self)
	// The oracle: in the CLI's own process, under its filter, uname fails.
	code, out, stderr := rt46hCLI(t, e, []string{rt46hSeccompExec + "=deny-uname", "AGORA_NO_HANDOFF=1"}, []string{self}, "--subagent", "uname")
	if strings.Contains(out+stderr, "UNAME-WORKED") {
		t.Skipf("SKIP: the filter does not reach the dispatch here (exit %d):\n%s%s", code, out, stderr)
	}
	code, out, stderr = rt46hCLI(t, e, []string{rt46hSeccompExec + "=deny-uname"}, []string{self}, "--subagent", "uname")
	t.Logf("handed off: exit %d\n%s%s", code, out, stderr)
	if n := e.handoffs(); n != 0 {
		t.Errorf("serve (seccomp filter: allow all) took %d dispatch(es) of a CLI whose filter denies uname(2)", n)
	}
	if strings.Contains(out+stderr, "UNAME-WORKED") {
		t.Errorf("the CLI's dispatch ran a syscall its own seccomp filter denies")
	}
}

// TestRedTeam46h_MorePrivilegedCaller: serve without CAP_NET_RAW, the CLI with it: declined
// (equality, not subset). And a CLI in its own user namespace (all capabilities there, none
// in serve's): declined.
func TestRedTeam46h_MorePrivilegedCaller(t *testing.T) {
	rt46hRequireRoot(t)
	requireBwrap(t)
	e := newEnv(t)
	rt46hServeUnder(t, e, nil, "setpriv", "--bounding-set=-net_raw", "--inh-caps=-net_raw")
	code, _, stderr := e.oneShot(nil, "--subagent", "worker")
	t.Logf("more privileged: exit %d\n%s", code, stderr)
	if e.handoffs() != 0 {
		t.Errorf("a CLI with more capabilities than serve: hand-offs %d\n%s", e.handoffs(), stderr)
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("SKIP: no unshare for the user-namespace caller")
	}
	code, _, stderr = rt46hCLI(t, e, nil, []string{"unshare", "-U", "-r", "--"}, "--subagent", "worker")
	t.Logf("user namespace: exit %d\n%s", code, stderr)
	if e.handoffs() != 0 {
		t.Errorf("serve took a dispatch from a CLI in another user namespace:\n%s", stderr)
	}
}

// TestRedTeam46h_MalformedProof: hostile proof fields are refused cleanly, serve lives on,
// and nothing is taken; a proof is used once (a replay is declined for the proof).
func TestRedTeam46h_MalformedProof(t *testing.T) {
	e, serve := handoffEnv(t)
	exe := filepath.Join(filepath.Dir(agoraBin), "agora-full")
	if abs, err := filepath.EvalSymlinks(exe); err == nil {
		exe = abs
	}
	good := fmt.Sprintf(`"home":%q,"exe":%q,"env":%q,"subagent":"ok","budget":{}}`, e.home, exe, api.EnvDigest(e.vars))
	for name, proof := range map[string]string{
		"negative fd":  `"proof_fd":-1,"proof":"x",`,
		"huge fd":      `"proof_fd":9223372036854775807,"proof":"x",`,
		"overflow fd":  `"proof_fd":92233720368547758070,"proof":"x",`,
		"float fd":     `"proof_fd":1.5,"proof":"x",`,
		"string fd":    `"proof_fd":"3","proof":"x",`,
		"10MB proof":   `"proof_fd":3,"proof":"` + strings.Repeat("a", 10<<20) + `",`,
		"65B proof":    `"proof_fd":3,"proof":"` + strings.Repeat("a", 65) + `",`,
		"NUL proof":    `"proof_fd":3,"proof":"\u0000",`,
		"serve's fd 0": `"proof_fd":0,"proof":"` + strings.Repeat("0", 64) + `",`,
		"duplicate":    `"proof_fd":3,"proof":"a","proof_fd":4,`,
	} {
		status, body := e.postRaw(api.HandoffPath, []byte("{"+proof+good))
		if status < 400 || status >= 500 {
			t.Errorf("%s: status %d %.200s", name, status, body)
		}
	}
	// Replay: the first use is consumed (declined later by Prepare: this test is no CLI).
	p := e.proved(filepath.Join(e.home, "orch", "orch.sock"))
	_, first := e.postRaw(api.HandoffPath, []byte("{"+p+","+good))
	_, again := e.postRaw(api.HandoffPath, []byte("{"+p+","+good))
	t.Logf("first: %s\nreplay: %s", first, again)
	if !strings.Contains(again, "proof") {
		t.Errorf("a replayed proof was not refused for its proof: %s", again)
	}
	if serve.ProcessState != nil {
		t.Fatal("serve died")
	}
	if _, err := e.client().Health(t.Context()); err != nil {
		t.Errorf("serve does not answer after the malformed proofs: %v", err)
	}
	if e.handoffs() != 0 {
		t.Errorf("serve took %d", e.handoffs())
	}
}

// TestRedTeam46h_Flood: 500 challenges asked and never answered keep serve's descriptors
// bounded; a CLI after the flood is taken. A flood DURING a CLI's two requests (or a burn
// of small proof_fd numbers by another process) only makes the CLI run in-process: logged.
func TestRedTeam46h_Flood(t *testing.T) {
	e, serve := handoffEnv(t)
	sock := filepath.Join(e.home, "orch", "orch.sock")
	fds := func() int { es, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", serve.Process.Pid)); return len(es) }
	before := fds()
	ask := func() {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", api.HandoffProofPath)
		io.Copy(io.Discard, c)
	}
	for range 500 {
		ask()
	}
	// serve closes each ended connection on its own goroutine: wait for the count to come
	// down (the event), failing only if it stays above the bound.
	after := fds()
	for deadline := time.Now().Add(10 * time.Second); after > before+70 && time.Now().Before(deadline); after = fds() {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("serve's descriptors: %d before, %d after 500 challenges", before, after)
	if after > before+70 {
		t.Errorf("serve holds %d descriptors after the flood (%d before)", after, before)
	}
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 || e.handoffs() != 1 {
		t.Errorf("a CLI after the flood: exit %d, hand-offs %d\n%s", code, e.handoffs(), stderr)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					ask()
				}
			}
		})
	}
	code, _, stderr := e.oneShot(nil, "--subagent", "ok")
	close(stop)
	wg.Wait()
	t.Logf("a CLI during a flood: exit %d, hand-offs now %d, stderr:\n%s", code, e.handoffs(), stderr)
	if code != 0 {
		t.Errorf("a CLI during a flood failed (exit %d): want taken or run in-process", code)
	}
	if _, err := e.client().Health(t.Context()); err != nil {
		t.Errorf("serve does not answer after the flood: %v", err)
	}
}

// TestRedTeam46h_DeclineLineInjection: a fake taker (a process of this user at orch.sock)
// declines with a reason holding a newline and terminal escapes. The CLI's one line must stay
// one line, without raw escapes; for the front and for agora-full.
func TestRedTeam46h_DeclineLineInjection(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.home, "orch")
	must(t, os.MkdirAll(dir, 0o700))
	must(t, os.Chmod(dir, 0o700))
	sock := filepath.Join(dir, "orch.sock")
	l, err := net.Listen("unix", sock)
	must(t, err)
	must(t, os.Chmod(sock, 0o600))
	const why = "fine\nagora: INJECTED dispatch 01ABCDEFGHJKMNPQRSTVWXYZ01 finished\x1b[2K\r\x1b[31mred\x07\u202etxt\u2028sep\x1b]0;title\x07"
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == api.HandoffProofPath {
			w.Write([]byte(`{"fd":0}`))
			return
		}
		w.WriteHeader(http.StatusConflict)
		b, _ := json.Marshal(api.Error{Error: why, Code: api.HandoffDeclined}) // serve's own wire form
		w.Write(b)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	for name, bin := range map[string]string{"front": agoraBin, "agora-full": filepath.Join(filepath.Dir(agoraBin), "agora-full")} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, "dispatch", "run", "--subagent", "worker")
			cmd.Env = e.vars
			var eo bytes.Buffer
			cmd.Stderr = &eo
			cmd.Run()
			stderr := eo.String()
			t.Logf("stderr: %q", stderr)
			if !strings.Contains(stderr, "declined this dispatch") {
				t.Fatalf("the fake taker's decline was not shown")
			}
			for _, bad := range []string{"\x1b", "\r", "\x07", "\u202e", "\u2028"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("the decline line carries a raw %q", bad)
				}
			}
			for line := range strings.Lines(stderr) {
				if strings.HasPrefix(line, "agora: INJECTED") {
					t.Errorf("the taker's reason forged a line of its own on the CLI's stderr: %q", line)
				}
			}
		})
	}
}

// TestRedTeam46h_ConnectedNotSender: which process does the taker judge? A process that is
// not confined connects and answers the challenge; then a Landlock-confined child that
// inherited the connection (fork after connect; SO_PEERCRED is the connector's) sends the
// hand-off on it. The taker judges the CONNECTOR (pid from SO_PEERCRED, /proc of that pid,
// the proof bound to it): the confined sender passes callerWidens; what stops it is Prepare's
// check that the connector is `agora dispatch run`. And with no proof from the connector, the
// confined child cannot make one (its own readlink is refused).
func TestRedTeam46h_ConnectedNotSender(t *testing.T) {
	rt46hRequireRoot(t)
	if why := agoratest.LandlockAvailable(); why != "" {
		t.Skip("SKIP: " + why)
	}
	e, _ := handoffEnv(t)
	sock := filepath.Join(e.home, "orch", "orch.sock")
	exe := filepath.Join(filepath.Dir(agoraBin), "agora-full")
	if abs, err := filepath.EvalSymlinks(exe); err == nil {
		exe = abs
	}
	good := fmt.Sprintf(`"home":%q,"exe":%q,"env":%q,"subagent":"ok","budget":{}}`, e.home, exe, api.EnvDigest(e.vars))
	send := func(t *testing.T, proved bool) string {
		c, err := net.Dial("unix", sock)
		must(t, err)
		defer c.Close()
		cred, err := peercred.Of(c)
		must(t, err)
		br := bufio.NewReader(c)
		members := ""
		if proved {
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", api.HandoffProofPath)
			resp, err := http.ReadResponse(br, nil)
			must(t, err)
			var ch api.HandoffChallenge
			must(t, json.NewDecoder(resp.Body).Decode(&ch))
			resp.Body.Close()
			secret, err := callerctx.Answer(cred.Pid, ch.FD)
			must(t, err)
			members = fmt.Sprintf(`"proof_fd":%d,"proof":%q,`, ch.FD, secret)
		}
		body := "{" + members + good
		req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", api.HandoffPath, len(body), body)
		f, err := c.(*net.UnixConn).File()
		must(t, err)
		defer f.Close()
		dirs := []string{"/usr", "/etc", "/proc", "/sys", "/dev", "/tmp", filepath.Dir(agoraBin)}
		for _, d := range []string{"/lib", "/lib64", "/bin", "/sbin"} {
			if _, err := os.Stat(d); err == nil {
				dirs = append(dirs, d)
			}
		}
		cmd := agoratest.LandlockCommand(dirs, append(os.Environ(), rt46hSendEnv+"="+req), rt46hSelf(t))
		cmd.ExtraFiles = []*os.File{f}
		out, err := cmd.CombinedOutput()
		if err != nil && len(out) == 0 {
			t.Fatalf("the confined sender: %v", err)
		}
		return string(out)
	}
	proved := send(t, true)
	t.Logf("confined sender, connector proved:\n%s", proved)
	if strings.Contains(proved, "proof") || strings.Contains(proved, "differs") {
		t.Logf("callerWidens judged the sender")
	} else {
		t.Logf("callerWidens passed: the taker judged the connector (pid from SO_PEERCRED); the decline above is Prepare's")
	}
	unproved := send(t, false)
	t.Logf("confined sender, no proof:\n%s", unproved)
	if !strings.Contains(unproved, "no proof") {
		t.Errorf("without the connector's proof: %s", unproved)
	}
	if e.handoffs() != 0 {
		t.Errorf("serve took a hand-off sent by a confined process on an inherited connection")
	}
}

// TestRedTeam46h_DeclineLineShown: a real taker's decline (here: a CLI under a seccomp filter
// serve lacks) prints the one line saying why. The clients parsed {"error":{"code","message"}}
// while serve writes api.Error, {"error":"<why>","code":"handoff_declined"}, and the line never
// showed; they read api.Error now.
func TestRedTeam46h_DeclineLineShown(t *testing.T) {
	rt46hRequireRoot(t)
	e, _ := handoffEnv(t)
	for name, bin := range map[string]string{"front": agoraBin, "agora-full": filepath.Join(filepath.Dir(agoraBin), "agora-full")} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(rt46hSelf(t), bin, "dispatch", "run", "--subagent", "ok")
			cmd.Env = append(slices.Clone(e.vars), rt46hSeccompExec+"=allow")
			var eo bytes.Buffer
			cmd.Stderr = &eo
			cmd.Run()
			if e.handoffs() != 0 {
				t.Fatalf("taken")
			}
			if !strings.Contains(eo.String(), "declined this dispatch (seccomp") {
				t.Errorf("serve declined (409 handoff_declined, seccomp) but the CLI said nothing of it:\n%s", eo.String())
			}
		})
	}
}
