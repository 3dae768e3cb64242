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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/service"
)

// service.Listen binds under a hidden name
// beside its path, chmods it 0600 and renames it onto the path; the resident logs the
// hand-offs it declines. Each test names the promise it attacks and fails if the attack
// succeeds; the ones that broke the first version (a resident listening where no CLI can
// connect, litter after a kill inside Listen, a serve stopping removing a newer serve's
// socket, declines growing resident.log and keeping the resident alive) were fixed.

// rt48ListenEnv, set in a child of this test binary, makes it call service.Listen on the
// path it names under umask 022 and exit before any test or build (TestMain): the process
// TestRedTeam48_KilledMidListen kills inside Listen.
const rt48ListenEnv = "AGORA_RT48_LISTEN_AT"

// rt48ListenChild is that child's whole run, when rt48ListenEnv is set.
func rt48ListenChild() {
	p := os.Getenv(rt48ListenEnv)
	if p == "" {
		return
	}
	syscall.Umask(0o022)
	if _, err := service.Listen(p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(0)
}

// TestRedTeam48_WhatIsAtPath: whatever a same-user process left at the socket's path (a
// symlink to a file of the user's, a dangling symlink, a FIFO, a regular file) is replaced
// by a listening 0600 socket, and a symlink's target is neither followed nor touched.
func TestRedTeam48_WhatIsAtPath(t *testing.T) {
	for _, kind := range []string{"symlink to a file", "dangling symlink", "fifo", "regular file"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.Chmod(dir, 0o700))
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, []byte("precious"), 0o644))
			path := filepath.Join(dir, "orch.sock")
			switch kind {
			case "symlink to a file":
				must(t, os.Symlink(victim, path))
			case "dangling symlink":
				must(t, os.Symlink(filepath.Join(dir, "nowhere"), path))
			case "fifo":
				must(t, syscall.Mkfifo(path, 0o666))
			case "regular file":
				must(t, os.WriteFile(path, []byte("x"), 0o666))
			}
			ln, err := service.Listen(path)
			if err != nil {
				t.Fatalf("Listen over a %s: %v", kind, err)
			}
			defer ln.Close()
			fi, err := os.Lstat(path)
			must(t, err)
			if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
				t.Errorf("after Listen over a %s, the path is %v, want a 0600 socket", kind, fi.Mode())
			}
			if vi, err := os.Stat(victim); err != nil || vi.Mode().Perm() != 0o644 || vi.Mode().Type() != 0 {
				t.Errorf("the symlink's target was touched: %v %v", vi, err)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious" {
				t.Errorf("the symlink's target now holds %q", b)
			}
			if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
				t.Errorf("Listen created the dangling symlink's target")
			}
			if err := acceptsAt(ln, path); err != nil {
				t.Fatalf("the socket Listen put over a %s does not accept: %v", kind, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("Listen left %d entries, want 1 (the socket)", len(ents))
			}
		})
	}
}

// TestRedTeam48_LongPath: a path whose length is at sun_path's limit, where a socket bound at
// the path itself (as Listen did before) fits, fits Listen's random name too, for both of
// agora's socket names.
func TestRedTeam48_LongPath(t *testing.T) {
	base := t.TempDir()
	for _, name := range []string{"orch.sock", "resident.sock"} {
		for want := 100; want <= 110; want++ {
			pad := want - len(base) - 2 - len(name) // base + "/" + pad + "/" + name
			if pad < 1 {
				t.Fatalf("the temp dir %s is too long for this test", base)
			}
			dir := filepath.Join(base, strings.Repeat("d", pad))
			must(t, os.MkdirAll(dir, 0o700))
			path := filepath.Join(dir, name)
			if len(path) != want {
				t.Fatalf("built a path of %d bytes, want %d", len(path), want)
			}
			// What Listen did before: bind at the path itself.
			old, oldErr := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if oldErr == nil {
				old.Close()
			}
			os.Remove(path)
			ln, err := service.Listen(path)
			if err == nil {
				ln.Close()
				os.Remove(path)
			}
			t.Logf("%d-byte path to %s: bound at the path: %v; Listen: %v", want, name, oldErr, err)
			if oldErr == nil && err != nil {
				t.Errorf("%d-byte path %s: bound at the path it fits, Listen fails: %v", want, name, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("%d-byte path: Listen left %d entries", want, len(ents))
			}
			os.RemoveAll(dir)
		}
	}
}

// TestRedTeam48_ListensWhereNoOneConnects: Listen binds a name as long as "orch.sock" and
// renames it onto path; a path longer than that (resident.sock) may be past sun_path's limit
// (108 bytes with its NUL on Linux) where the bound name is not. Bound at the path itself, as
// before, Listen failed there; now it must too, or its socket must take a connection: a
// listener at a path no one can connect() to is a resident that holds resident.lock, stays for
// resident.idle and takes nothing, while each CLI runs its dispatch itself and starts another
// resident that exits (lock held).
func TestRedTeam48_ListensWhereNoOneConnects(t *testing.T) {
	base := t.TempDir()
	for want := 106; want <= 111; want++ {
		pad := want - len(base) - 2 - len("resident.sock")
		dir := filepath.Join(base, strings.Repeat("d", pad))
		must(t, os.MkdirAll(dir, 0o700))
		path := filepath.Join(dir, "resident.sock")
		ln, err := service.Listen(path)
		if err != nil {
			t.Logf("%d-byte path: Listen fails: %v", want, err)
			continue
		}
		if err := acceptsAt(ln, path); err != nil {
			t.Errorf("%d-byte path: Listen succeeded, yet no one can connect to its socket: %v", want, err)
		}
		ln.Close()
		os.Remove(path)
	}
}

// TestRedTeam48_UnreachableResident: the same end to end. A home whose orch/resident.sock is
// 109 bytes (its orch.sock, 105, fits: serve works there) runs no resident, which no CLI could
// connect to (the first version listened there, held resident.lock and took nothing, while
// each CLI started another that exited); its dispatches run in their CLIs, and doctor says
// why no resident runs.
func TestRedTeam48_UnreachableResident(t *testing.T) {
	e := residentEnv(t, "")
	// The same home under a longer name: a symbolic link to its directory.
	base := t.TempDir()
	pad := 109 - len(base) - 2 - len("home/orch/resident.sock")
	link := filepath.Join(base, strings.Repeat("l", pad))
	must(t, os.Symlink(filepath.Dir(e.home), link))
	home := filepath.Join(link, "home")
	if n := len(filepath.Join(home, "orch", "resident.sock")); n != 109 {
		t.Fatalf("resident.sock's path is %d bytes, want 109", n)
	}
	for i, kv := range e.vars {
		if strings.HasPrefix(kv, "AGORA_HOME=") {
			e.vars[i] = "AGORA_HOME=" + home
		}
	}
	for i := range 3 {
		if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
			t.Fatalf("dispatch %d: exit %d\n%s", i, code, stderr)
		}
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
	if pids := residentsOf(home); len(pids) > 0 {
		t.Errorf("residents %v run for a home whose resident.sock no CLI can connect to; resident.log:\n%s", pids, log)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGTERM)
			waitGone(t, pid, 10*time.Second, "SIGTERM")
		}
	}
	if len(log) > 0 {
		t.Errorf("a resident was started (resident.log):\n%s", log)
	}
	if doc := e.runAllowFail("doctor"); !strings.Contains(doc, "over the 107 a Unix socket's may be") {
		t.Errorf("doctor does not say why no resident runs:\n%s", doc)
	}
}

// TestRedTeam48_KilledMidListen: a process killed (kill -9, the OOM killer) inside Listen,
// after the bind, must not leave a socket behind that is open to group or others, nor one that
// the next Listen of the path (the next serve or resident, holding the lock) never removes.
// Before, the socket was bound at the path itself, and the next Listen removed it. strace
// kills the process exactly at Listen's chmod (the socket still has the umask's mode) or at
// its rename (already 0600).
func TestRedTeam48_KilledMidListen(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("SKIP: strace is not installed; it kills the process inside Listen")
	}
	for _, at := range []string{"fchmodat", "renameat"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.Chmod(dir, 0o700))
			path := filepath.Join(dir, "orch.sock")
			cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace="+at, "-e", "inject="+at+":signal=KILL", os.Args[0])
			cmd.Env = append(os.Environ(), rt48ListenEnv+"="+path)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() == 0 || ee.ExitCode() == 3 {
				t.Fatalf("the Listen child was not killed inside Listen at %s (%v):\n%s", at, err, out)
			}
			var left []string
			for _, e := range mustReadDir(t, dir) {
				fi, _ := e.Info()
				left = append(left, fmt.Sprintf("%s %v", e.Name(), fi.Mode()))
			}
			t.Logf("killed at %s; the directory holds %v", at, left)
			// The next serve or resident of the path.
			ln, err := service.Listen(path)
			must(t, err)
			ln.Close()
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) { // as serve does when it stops
				t.Fatal(err)
			}
			for _, e := range mustReadDir(t, dir) {
				fi, _ := e.Info()
				if fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s is left with mode %v (open to group/others) after the next Listen and its stop", e.Name(), fi.Mode())
				} else {
					t.Errorf("%s (%v) is left for good after the next Listen and its stop: nothing removes it", e.Name(), fi.Mode())
				}
			}
		})
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	return ents
}

// TestRedTeam48_ServeStopKeepsNewSocket: serve's twin of
// TestRedTeam45_ReplacedResidentKeepsNewSocket. A serve whose orch.sock was replaced by a newer serve's
// (serve.lock removed, so a second one started) must leave the newer one's socket in place
// when it stops: now that the listener no longer unlinks, only its `defer os.Remove(sock)`
// decides, and it does not look whose socket is there.
func TestRedTeam48_ServeStopKeepsNewSocket(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	first := e.serve()
	t.Cleanup(func() { first.Process.Kill(); first.Wait() })
	sock := filepath.Join(e.home, "orch", "orch.sock")
	before, err := os.Lstat(sock)
	must(t, err)
	must(t, os.Remove(filepath.Join(e.home, "orch", service.LockFile)))
	second := exec.Command(agoraBin, "orch", "serve")
	second.Env = e.vars
	var secondOut bytes.Buffer
	second.Stdout, second.Stderr = &secondOut, &secondOut
	must(t, second.Start())
	t.Cleanup(func() { second.Process.Kill(); second.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Lstat(sock); err == nil && !os.SameFile(fi, before) {
			if h, err := e.client().Health(context.Background()); err == nil && h.PID == second.Process.Pid {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second serve did not answer on orch.sock within 30s:\n%s", secondOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, first.Process.Signal(syscall.SIGTERM))
	first.Wait()
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("the first serve, stopping, removed the second serve's orch.sock: %v", err)
	} else if h, err := e.client().Health(context.Background()); err != nil || h.PID != second.Process.Pid {
		t.Errorf("orch.sock no longer answers for the second serve (pid %d): %+v %v", second.Process.Pid, h, err)
	}
}

// rt48Flood posts n hand-off requests to sock that the resident declines (another home),
// their fields carrying a forged log line, and returns how many it declined.
func rt48Flood(t *testing.T, sock string, n int, each time.Duration) int {
	t.Helper()
	hc := socketClient(sock)
	const forged = "\ntime=2000-01-01T00:00:00Z level=ERROR msg=FORGED-BY-RT48\n"
	body := fmt.Sprintf(`{"home":%q,"exe":%q,"env":%q,"subagent":%q}`, "/elsewhere"+forged, "/bin/x"+forged, "e"+forged, "ok"+forged)
	declined := 0
	for range n {
		resp, err := hc.Post("http://agora"+api.HandoffPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("after %d declines: %v", declined, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict {
			t.Fatalf("status %d, want 409 (declined)", resp.StatusCode)
		}
		declined++
		if each > 0 {
			time.Sleep(each)
		}
	}
	return declined
}

// TestRedTeam48_DeclineFlood: resident.log is capped only when a resident starts over it
// (residentLogCap). A process of this user that posts declined hand-offs in a loop (or a shell
// whose environment is not the resident's, running dispatches in a loop: each one declined)
// grew it by two lines a decline, 2.58 MB for 10,000, while the resident lived. Now a reason
// is said at most once a minute, the leaving line counts them all, and no line is forged.
func TestRedTeam48_DeclineFlood(t *testing.T) {
	e := residentEnv(t, "")
	e.firstResident()
	logPath := filepath.Join(e.home, "orch", "resident.log")
	before, err := os.Stat(logPath)
	must(t, err)
	const n = 2000
	if got := rt48Flood(t, e.residentSock(), n, 0); got != n {
		t.Fatalf("%d declined, want %d", got, n)
	}
	if took := e.stopResident(); took != 0 {
		t.Errorf("the resident took %d of the flood's hand-offs", took)
	}
	fi, err := os.Stat(logPath)
	must(t, err)
	log, _ := os.ReadFile(logPath)
	declines := bytes.Count(log, []byte(`msg="hand-off declined"`))
	refused := bytes.Count(log, []byte(`msg=refused`))
	t.Logf("%d declined hand-offs: resident.log grew %d bytes, %d 'hand-off declined' lines, %d 'refused' lines",
		n, fi.Size()-before.Size(), declines, refused)
	if declines != 1 || refused != 0 {
		t.Errorf("%d declines of one reason within a minute wrote %d decline lines and %d refusal lines, want 1 and 0:\n%s", n, declines, refused, log)
	}
	if !bytes.Contains(log, []byte(fmt.Sprintf(`declined=%d dispatches=0`, n))) {
		t.Errorf("the leaving line does not count the %d declines:\n%s", n, log)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.HasPrefix(line, "time=2000-01-01") || strings.Contains(line, "level=ERROR msg=FORGED") && !strings.Contains(line, `\n`) {
			t.Errorf("a peer forged a line of resident.log: %q", line)
			break
		}
	}
}

// TestRedTeam48_DeclinesKeepItAlive: a resident leaves "after resident.idle with no
// dispatch" (operations.md). Hand-offs it declines are no dispatch of its; a stream of them
// (a process of this user, or CLIs of another environment that it never serves), one every
// 500 ms against an idle of 3 s, kept it running (and its log growing) for as long as they
// came. It must leave while they still come.
func TestRedTeam48_DeclinesKeepItAlive(t *testing.T) {
	e := residentEnv(t, "resident: {idle: 3s}\n")
	pid := e.firstResident()
	start := time.Now()
	n := 0
	for syscall.Kill(pid, 0) == nil && time.Since(start) < 30*time.Second {
		hc := socketClient(e.residentSock())
		if resp, err := hc.Post("http://agora"+api.HandoffPath, "application/json",
			strings.NewReader(`{"home":"/elsewhere","exe":"/bin/x","env":"e","subagent":"ok"}`)); err == nil {
			resp.Body.Close()
			n++
		}
		// The stream's pace is the attack (one decline every 500 ms against an idle of 3 s),
		// not a wait for anything.
		time.Sleep(500 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
		t.Errorf("after %d declined hand-offs over %s, the resident (idle 3s, no dispatch since its start) still runs:\n%s",
			n, time.Since(start).Round(time.Second), log)
	}
}

// TestRedTeam48_DeclinedSecrets: a CLI the resident declines (another environment) with a
// secret in --input and in its --callback URL: the decline is said in resident.log, the
// secrets are not, and the CLI runs the dispatch itself.
func TestRedTeam48_DeclinedSecrets(t *testing.T) {
	e := residentEnv(t, "egress:\n  allow_private: [127.0.0.1/32]\n")
	e.firstResident()
	dead := agoratest.FreeAddr(t) // nothing listens there: the callback fails
	const token, inputSecret, envSecret = "cbtoken-rt48-9d1e", "inputsecret-rt48-3a7c", "envsecret-rt48-5b2f"
	code, out, stderr, hung := e.oneShotWithin(60*time.Second, []string{"AGORA_RT48_SECRET=" + envSecret},
		"--subagent", "ok", "--callback", fmt.Sprintf("http://%s/hook?token=%s", dead, token),
		"--input", fmt.Sprintf(`{"password":%q}`, inputSecret))
	if hung {
		t.Fatal("the declined CLI hung")
	}
	t.Logf("declined CLI: exit %d\n%s\n%s", code, out, stderr)
	if n := e.stopResident(); n != 0 {
		t.Errorf("the resident took %d dispatches of another environment", n)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
	if !bytes.Contains(log, []byte(`msg="hand-off declined"`)) {
		t.Errorf("resident.log does not say the decline:\n%s", log)
	}
	for _, s := range []string{token, inputSecret, envSecret} {
		if bytes.Contains(log, []byte(s)) {
			t.Errorf("resident.log holds a secret (%s):\n%s", s, log)
		}
	}
}
