package service_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/orch/api"
)

// The resident dispatcher (`agora dispatch resident`) attacked with real
// processes. Each test names the promise it attacks.

// oneShotWithin is oneShot with a deadline: a CLI that hangs is a failure, not a stuck test.
func (e *env) oneShotWithin(within time.Duration, extraEnv []string, args ...string) (code int, stdout, stderr string, hung bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, agoraBin, append([]string{"dispatch", "run"}, args...)...)
	cmd.Env = append(slices.Clone(e.vars), extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		return -1, out.String(), errOut.String(), true
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, out.String(), errOut.String(), false
}

// residentsOf lists the live `agora dispatch resident` processes whose AGORA_HOME is home.
func residentsOf(home string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("\x00dispatch\x00resident")) {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(environ), "\x00"), "AGORA_HOME="+home) {
			continue
		}
		// A zombie is no resident.
		if stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat")); err == nil {
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestRedteam45_StopAgainstAForeignSocket: `agora dispatch resident --stop` when the
// resident's socket is held by another process of this user (not a resident dispatcher)
// must neither remove that process's socket nor wait forever for that process to exit.
func TestRedteam45_StopAgainstAForeignSocket(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.home, "orch")
	must(t, os.MkdirAll(dir, 0o700))
	sock := filepath.Join(dir, "resident.sock")
	ln, err := net.Listen("unix", sock)
	must(t, err)
	must(t, os.Chmod(sock, 0o600))
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer func() { ln.Close(); <-accepted }()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stop := exec.CommandContext(ctx, agoraBin, "dispatch", "resident", "--stop")
	stop.Env = e.vars
	out, err := stop.CombinedOutput()
	if ctx.Err() != nil {
		t.Errorf("--stop waited 15s for pid %d (this test, not a resident dispatcher) to exit:\n%s", os.Getpid(), out)
	} else if err == nil {
		t.Errorf("--stop succeeded against a socket no resident dispatcher holds:\n%s", out)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("--stop removed the socket of a process that is not a resident dispatcher: %v\n%s", err, out)
	}
	t.Logf("--stop said: %s", out)
}

// TestRedteam45_ConfigChangedWhileStarting: agora.yaml edited while a resident starts (after
// it loaded the file, before it took the file's digest) must not leave a resident that runs
// dispatches with the old file as if it were the new one. A FIFO at agora.yaml makes the
// race certain: the first read gets the file without leader:, every later read the file with
// leader: (a home where no resident may run). The resident must leave, saying agora.yaml
// changed, as it does for any later edit.
func TestRedteam45_ConfigChangedWhileStarting(t *testing.T) {
	e := residentEnv(t, "resident: {idle: 2m}\n")
	cfg := filepath.Join(e.home, "agora.yaml")
	before, err := os.ReadFile(cfg)
	must(t, err)
	after := append(slices.Clone(before), []byte("\nleader: {lease: agora, namespace: default}\n")...)
	fifo := filepath.Join(t.TempDir(), "agora.yaml.fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	must(t, os.Remove(cfg))
	must(t, os.Symlink(fifo, cfg))
	stopFeeding := make(chan struct{})
	fed := make(chan int, 1)
	go func() {
		n := 0
		defer func() { fed <- n }()
		for {
			select {
			case <-stopFeeding:
				return
			default:
			}
			f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			content := after
			if n == 0 {
				content = before
			}
			f.Write(content)
			f.Close()
			n++
			// One file per open of the reader: it reads to the end and closes.
			time.Sleep(300 * time.Millisecond)
		}
	}()
	var stderr bytes.Buffer
	res := exec.Command(agoraBin, "dispatch", "resident", "--idle", "2m")
	res.Env = e.vars
	res.Stdout, res.Stderr = &stderr, &stderr
	must(t, res.Start())
	exited := make(chan struct{})
	go func() { res.Wait(); close(exited) }()
	defer func() {
		res.Process.Kill()
		<-exited
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Lstat(e.residentSock()); err == nil && fi.Mode().Type() == os.ModeSocket {
			break
		}
		if time.Now().After(deadline) {
			close(stopFeeding)
			<-fed
			t.Fatalf("no resident within 30s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The edit lands: agora.yaml is now the file with leader:, a regular file.
	tmp := cfg + ".new"
	must(t, os.WriteFile(tmp, after, 0o600))
	must(t, os.Rename(tmp, cfg))
	// The FIFO is fed until the resident has left: a reader that opened it before the
	// rename gets its answer.
	select {
	case <-exited:
		if !strings.Contains(stderr.String(), `why="agora.yaml changed"`) {
			t.Errorf("the resident left, but not because agora.yaml changed:\n%s", stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the resident still runs 10s after agora.yaml gained leader: (it loaded the file without it, and took the digest of the file with it):\n%s", stderr.String())
	}
	close(stopFeeding)
	t.Logf("agora.yaml was read %d times through the FIFO", <-fed)
}

// TestRedteam45_UntrustedLog: an `agora dispatch run` that starts a resident must never
// hang on, or write its resident's log into, what it does not own: a FIFO at resident.log
// (in a 0700 orch/ or a group/world-writable one) must not block the dispatch, and no
// resident starts in an orch/ that others may write (its socket would never be used).
func TestRedteam45_UntrustedLog(t *testing.T) {
	e := residentEnv(t, "")
	dir := filepath.Join(e.home, "orch")
	for _, mode := range []os.FileMode{0o700, 0o777} {
		t.Run(fmt.Sprintf("orch %o", mode), func(t *testing.T) {
			must(t, os.MkdirAll(dir, 0o700))
			must(t, os.Chmod(dir, mode))
			logPath := filepath.Join(dir, "resident.log")
			os.Remove(logPath)
			must(t, syscall.Mkfifo(logPath, 0o600))
			defer os.Remove(logPath)
			code, _, stderr, hung := e.oneShotWithin(30*time.Second, nil, "--subagent", "ok")
			if hung {
				t.Fatalf("agora dispatch run hung 30s opening a FIFO at resident.log:\n%s", stderr)
			}
			if code != 0 {
				t.Errorf("exit %d\n%s", code, stderr)
			}
			// A CLI that starts a resident starts its process before it exits: once the CLI
			// has exited, one it started is running.
			if mode != 0o700 {
				if pids := residentsOf(e.home); len(pids) != 0 {
					t.Errorf("a resident (pids %v) started in an orch/ of mode %o", pids, mode)
				}
			}
		})
	}
	must(t, os.Chmod(dir, 0o700))
}

// TestRedteam45_IdleRace: dispatches that arrive as a resident with resident.idle 1s decides
// to leave are run (by the resident or by their CLI); none fails, and none says the resident
// "stopped before it said it accepted the dispatch".
func TestRedteam45_IdleRace(t *testing.T) {
	e := residentEnv(t, "resident: {idle: 1s}\n")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	runs := 0
	end := time.Now().Add(15 * time.Second)
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each CLI waits about the idle time after the last, so the resident's look that
			// finds it idle meets a new dispatch.
			pause := []time.Duration{900 * time.Millisecond, 1000 * time.Millisecond, 1100 * time.Millisecond}[g]
			for time.Now().Before(end) {
				code, _, stderr, hung := e.oneShotWithin(60*time.Second, nil, "--subagent", "ok")
				mu.Lock()
				runs++
				if hung || code != 0 || strings.Contains(stderr, "stopped before it said it accepted") {
					failures = append(failures, fmt.Sprintf("exit %d hung %v: %s", code, hung, stderr))
				}
				mu.Unlock()
				time.Sleep(pause)
			}
		}()
	}
	wg.Wait()
	log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
	t.Logf("%d dispatches; residents started %d, left %d", runs,
		strings.Count(string(log), "resident dispatcher serving"), strings.Count(string(log), "resident dispatcher left"))
	for _, f := range failures {
		t.Errorf("a dispatch racing the resident's idle exit: %s", f)
	}
}

// TestRedteam45_TwoStartAtOnce: CLIs that find no resident at the same moment each start one;
// exactly one stays (resident.lock), and every dispatch succeeds.
func TestRedteam45_TwoStartAtOnce(t *testing.T) {
	e := residentEnv(t, "")
	var wg sync.WaitGroup
	codes := make([]int, 4)
	errs := make([]string, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var hung bool
			codes[i], _, errs[i], hung = e.oneShotWithin(60*time.Second, nil, "--subagent", "ok")
			if hung {
				codes[i] = -1
			}
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 0 {
			t.Errorf("dispatch %d: exit %d\n%s", i, c, errs[i])
		}
	}
	pid := e.waitResident()
	agoraWait := time.Now().Add(10 * time.Second)
	for len(residentsOf(e.home)) > 1 && time.Now().Before(agoraWait) {
		time.Sleep(50 * time.Millisecond)
	}
	if pids := residentsOf(e.home); len(pids) != 1 || pids[0] != pid {
		log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
		t.Errorf("residents running: %v, want only %d (resident.lock's)\n%s", pids, pid, log)
	}
	// The next one is the resident's (a CLI of the four that came late may be too).
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		t.Errorf("after: exit %d\n%s", code, stderr)
	}
	if n := e.stopResident(); n < 1 || n > 1+len(codes)-1 {
		t.Errorf("the resident took %d dispatches, want 1 to %d", n, len(codes))
	}
}

// TestRedteam45_ForeignPeer: a process of this user that is not `agora dispatch run` (here
// the test itself, with the home's, binary's and environment's digests right) posting a learn
// dispatch to resident.sock is declined before anything is recorded.
func TestRedteam45_ForeignPeer(t *testing.T) {
	e := residentEnv(t, "")
	e.firstResident()
	listed := e.run("dispatch", "list", "-o", "json")
	exe := filepath.Join(filepath.Dir(agoraBin), "agora-full")
	if abs, err := filepath.EvalSymlinks(exe); err == nil {
		exe = abs
	}
	hc := socketClient(e.residentSock())
	for _, learn := range []bool{true, false} {
		// With a proof (this process may inspect the resident's): what declines is the peer.
		body := fmt.Sprintf(`{%s,"home":%q,"exe":%q,"env":%q,"env_all":%q,"subagent":"ok","budget":{},"learn":%v}`,
			e.proved(e.residentSock()), e.home, exe, api.EnvDigest(e.vars), api.ResidentEnvDigest(e.vars), learn)
		resp, err := hc.Post("http://agora"+api.HandoffPath, "application/json", strings.NewReader(body))
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "the peer is not") {
			t.Errorf("learn=%v from the test process: status %d %s, want 409 'the peer is not ...'", learn, resp.StatusCode, b)
		}
	}
	if now := e.run("dispatch", "list", "-o", "json"); now != listed {
		t.Errorf("a declined hand-off recorded a dispatch:\n%s\nwas\n%s", now, listed)
	}
	if n := e.stopResident(); n != 0 {
		t.Errorf("the resident took %d hand-offs from the test process", n)
	}
	// The decline is said in resident.log, with why (the CLI that was declined says nothing):
	// once for the two, of one reason within a minute; the leaving line counts both.
	log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
	if n := strings.Count(string(log), `msg="hand-off declined" pid=`+strconv.Itoa(os.Getpid())+` why="the peer is not`); n != 1 {
		t.Errorf("resident.log says %d declines of the test process's hand-offs, want 1:\n%s", n, log)
	}
	if !strings.Contains(string(log), "declined=2 dispatches=0") {
		t.Errorf("the leaving line does not count the 2 declines:\n%s", log)
	}
}

// TestRedteam45_WorkerAndSecrets: a sandboxed worker of a dispatch the resident runs does not
// see the home's orch/ (so never its socket); a secret in --input or in the --callback URL
// reaches neither resident.log nor the resident's command line.
func TestRedteam45_WorkerAndSecrets(t *testing.T) {
	e := residentEnv(t, "egress:\n  allow_private: [127.0.0.1/32]\n")
	cat := filepath.Join(t.TempDir(), "catalog")
	must(t, os.MkdirAll(cat, 0o755))
	orch := filepath.Join(e.home, "orch")
	probe := fmt.Sprintf("description: probe\nruntime: exec\ncommand: [sh, -c, 'if [ -e %s ] || [ -e %s/resident.sock ]; then echo REACHED; else echo unreachable; fi']\ncapabilities: [shell]\n", orch, orch)
	must(t, os.WriteFile(filepath.Join(cat, "probe.yaml"), []byte(probe), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "ok.yaml"), []byte("description: ok\nruntime: exec\ncommand: [sh, -c, 'echo fine']\ncapabilities: [shell]\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte("version: 1\nsubagents:\n  - {name: probe, from: probe.yaml}\n  - {name: ok, from: ok.yaml}\n"), 0o644))
	e.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	pid := e.firstResident()
	code, out, stderr := e.oneShot(nil, "--subagent", "probe")
	if code != 0 {
		t.Fatalf("the sandboxed probe: exit %d\n%s", code, stderr)
	}
	if logs := e.run("dispatch", "logs", strings.TrimSpace(out)); !strings.Contains(logs, "unreachable") || strings.Contains(logs, "REACHED") {
		t.Errorf("the sandboxed probe of %s says:\n%s", orch, logs)
	}
	// A port nothing listens on: the callback fails, and its failure is said somewhere.
	dead := agoratest.FreeAddr(t)
	const token, inputSecret = "cbtoken-4f1d9a7e", "inputsecret-77c2b1"
	code, _, stderr = e.oneShot(nil, "--subagent", "ok", "--callback", fmt.Sprintf("http://%s/hook?token=%s", dead, token),
		"--input", fmt.Sprintf(`{"password":%q}`, inputSecret))
	t.Logf("callback dispatch: exit %d\n%s", code, stderr)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	n := e.stopResident()
	log, _ := os.ReadFile(filepath.Join(orch, "resident.log"))
	if n != 2 {
		t.Errorf("the resident took %d dispatches, want 2; resident.log:\n%s", n, log)
	}
	for _, s := range []string{token, inputSecret} {
		if bytes.Contains(log, []byte(s)) {
			t.Errorf("resident.log holds a secret (%s):\n%s", s, log)
		}
		if bytes.Contains(cmdline, []byte(s)) {
			t.Errorf("the resident's command line holds a secret: %q", cmdline)
		}
	}
}

// TestRedteam45_RelativeHome: a relative AGORA_HOME names the home below the CLI's directory.
// The resident a CLI started for dir/home takes the next dispatch of the same words from the
// same directory, and never one from another directory, where the same words name another
// home (its CLI runs the dispatch there itself).
func TestRedteam45_RelativeHome(t *testing.T) {
	e := residentEnv(t, "")
	other := newEnvConfig(t, "resident: {idle: \"0\"}\n")
	var vars []string
	for _, kv := range e.vars {
		if !strings.HasPrefix(kv, "AGORA_HOME=") {
			vars = append(vars, kv)
		}
	}
	vars = append(vars, "AGORA_HOME=home")
	run := func(dir string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(agoraBin, append([]string{"dispatch", "run"}, args...)...)
		cmd.Env, cmd.Dir = vars, dir
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String(), errOut.String()
		}
		must(t, err)
		return 0, out.String(), errOut.String()
	}
	if code, _, stderr := run(filepath.Dir(e.home), "--subagent", "ok"); code != 0 {
		t.Fatalf("first dispatch: exit %d\n%s", code, stderr)
	}
	e.waitResident()
	if code, _, stderr := run(filepath.Dir(e.home), "--subagent", "ok"); code != 0 {
		t.Fatalf("second dispatch: exit %d\n%s", code, stderr)
	}
	code, out, stderr := run(filepath.Dir(other.home), "--subagent", "worker")
	if code != 0 {
		t.Fatalf("the other directory's dispatch: exit %d\n%s", code, stderr)
	}
	if id := strings.TrimSpace(out); !strings.Contains(other.run("dispatch", "describe", id, "-o", "json"), id) {
		t.Errorf("dispatch %s is not in the other directory's home", id)
	}
	if n := e.stopResident(); n != 1 {
		t.Errorf("the resident took %d dispatches, want 1 (the second, from its own directory)", n)
	}
}

// TestRedteam45_ReplacedResidentKeepsNewSocket: a resident whose socket was replaced by a
// newer resident's (its resident.lock removed, so a second one started) leaves, and must
// leave the newer one's socket in place: its own listener's close must not unlink the path.
func TestRedteam45_ReplacedResidentKeepsNewSocket(t *testing.T) {
	e := residentEnv(t, "")
	first := e.firstResident()
	must(t, os.Remove(filepath.Join(e.home, "orch", "resident.lock")))
	var stderr bytes.Buffer
	second := exec.Command(agoraBin, "dispatch", "resident", "--idle", "1m")
	second.Env = e.vars
	second.Stdout, second.Stderr = &stderr, &stderr
	must(t, second.Start())
	exited := make(chan struct{})
	go func() { second.Wait(); close(exited) }()
	defer func() {
		second.Process.Kill()
		<-exited
	}()
	waitGone(t, first, 15*time.Second, "its socket was replaced")
	if fi, err := os.Lstat(e.residentSock()); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("the second resident's socket is gone: %v", err)
	}
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		t.Errorf("a dispatch to the second resident: exit %d\n%s", code, stderr)
	}
	// The second looks at its socket, then at agora.yaml, every second: written, agora.yaml
	// makes it leave at its next look, which must find its socket its own.
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	must(t, err)
	_, err = f.WriteString("\n# changed\n")
	must(t, err)
	must(t, f.Close())
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the second resident still runs 15 s after agora.yaml changed:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), `why="agora.yaml changed"`) {
		t.Errorf("the second resident left, but not for the edit of agora.yaml (its socket no longer its own?):\n%s", stderr.String())
	}
}

// socketClient is an HTTP client of the server listening on the Unix socket sock.
func socketClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}
