package service_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/peercred"
)

// residentEnv is an env with the hand-off catalog and no serve: its first `agora dispatch
// run` starts the resident dispatcher (internal/cli/dispatchcmd/resident.go). yaml goes into
// agora.yaml. The resident is stopped when the test ends.
func residentEnv(t *testing.T, yaml string) *env {
	t.Helper()
	requireBwrap(t)
	e := newEnvConfig(t, yaml)
	// The harness keeps every other test's `agora dispatch run` from starting a resident
	// (agoratest.noResident); these are the resident's.
	e.vars = slices.DeleteFunc(e.vars, func(kv string) bool { return strings.HasPrefix(kv, "AGORA_NO_RESIDENT=") })
	e.applySubagents(map[string]string{
		"ok":      "runtime: exec\ncommand: [sh, -c, 'echo fine']\ncapabilities: [shell]\n",
		"failing": "runtime: exec\ncommand: [sh, -c, 'echo bad >&2; exit 3']\ncapabilities: [shell]\n",
		"slow":    "runtime: exec\ncommand: [sh, -c, 'echo working on it; sleep 2; echo done']\ncapabilities: [shell]\n",
		"hang":    "runtime: exec\ncommand: [sh, -c, 'echo hanging; sleep 60']\ncapabilities: [shell]\n",
	})
	t.Cleanup(func() {
		cmd := exec.Command(agoraBin, "dispatch", "resident", "--stop")
		cmd.Env = e.vars
		cmd.Run()
	})
	return e
}

// runAllowFail runs agora ARGS and returns its stdout whatever its exit code (doctor exits 1
// on a host missing something a dispatch of another target needs).
func (e *env) runAllowFail(args ...string) string {
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = e.vars
	out, _ := cmd.Output()
	return string(out)
}

func (e *env) residentSock() string { return filepath.Join(e.home, "orch", "resident.sock") }

// waitResident waits until the resident dispatcher listens and returns its pid.
func (e *env) waitResident() int {
	e.t.Helper()
	return e.waitNewResident(0)
}

// waitNewResident waits until a resident dispatcher other than pid old listens (a killed one
// is a zombie for a moment) and returns its pid. It listens once its socket answers and the
// process holding it is the one resident.lock names: the lock is taken before the socket is
// bound, and a killed resident's socket is still at the path until the new one replaces it.
func (e *env) waitNewResident(old int) int {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if pid := e.residentPID(); pid > 0 && pid != old && e.socketHeldBy(pid) {
			return pid
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
			e.t.Fatalf("no resident dispatcher listens within 20s; resident.log:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// socketHeldBy reports whether the resident socket answers and process pid listens on it.
func (e *env) socketHeldBy(pid int) bool {
	c, err := net.DialTimeout("unix", e.residentSock(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	cred, err := peercred.Of(c)
	return err == nil && int(cred.Pid) == pid
}

// firstResident runs the home's first dispatch (subagent ok), which starts the resident
// dispatcher, waits until the resident listens and returns its pid.
func (e *env) firstResident() int {
	e.t.Helper()
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		e.t.Fatalf("first dispatch: exit %d\n%s", code, stderr)
	}
	return e.waitResident()
}

// residentPID is the pid resident.lock names, 0 for none.
func (e *env) residentPID() int {
	b, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.lock"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// waitGone waits until process pid is gone.
func waitGone(t *testing.T, pid int, within time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the resident dispatcher (pid %d) is still running %s after %s", pid, within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopResident stops the resident with --stop and returns how many dispatches it took, as
// its last line in resident.log says.
func (e *env) stopResident() int {
	e.t.Helper()
	cmd := exec.Command(agoraBin, "dispatch", "resident", "--stop")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("agora dispatch resident --stop: %v\n%s", err, out)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
	m := regexp.MustCompile(`msg="resident dispatcher left" .*dispatches=(\d+)\n$`).FindSubmatch(log)
	if m == nil {
		e.t.Fatalf("resident.log does not end with the resident's leaving:\n%s", log)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestResident_StartsAndTakesTheNext: with no serve, the first `agora dispatch run` runs its
// dispatch itself and starts the resident dispatcher; the next ones are supervised by the
// resident's process, and print, exit and record exactly what the in-process path does.
func TestResident_StartsAndTakesTheNext(t *testing.T) {
	e := residentEnv(t, "")
	if code, out, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		t.Fatalf("first dispatch: exit %d\n%s\n%s", code, out, stderr)
	}
	pid := e.waitResident()
	if doc := e.runAllowFail("doctor", "-o", "json"); !strings.Contains(doc, `"name": "resident-dispatcher"`) ||
		!strings.Contains(doc, fmt.Sprintf("running (pid %d,", pid)) {
		t.Errorf("agora doctor does not show the running resident (pid %d):\n%s", pid, doc)
	}
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"success", []string{"--subagent", "ok"}, 0},
		{"failure", []string{"--subagent", "failing"}, 3},
		{"not found", []string{"--subagent", "nosuch"}, 6},
		{"json", []string{"--subagent", "ok", "-o", "json"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rCode, rOut, rErr := e.oneShot(nil, c.args...)
			pCode, pOut, pErr := e.oneShot(nil, append(c.args, "--in-process")...)
			if rCode != c.code || pCode != c.code {
				t.Fatalf("exit codes: resident %d, in-process %d, want %d\n%s\n%s", rCode, pCode, c.code, rErr, pErr)
			}
			norm := func(s string) string { return varying.ReplaceAllString(s, "X") }
			if norm(rErr) != norm(pErr) {
				t.Errorf("stderr differs:\nresident:\n%s\nin-process:\n%s", rErr, pErr)
			}
			if c.name != "json" {
				if norm(rOut) != norm(pOut) {
					t.Errorf("stdout differs:\nresident:\n%s\nin-process:\n%s", rOut, pOut)
				}
				return
			}
			var r, p map[string]any
			must(t, json.Unmarshal([]byte(rOut), &r))
			must(t, json.Unmarshal([]byte(pOut), &p))
			if !slices.Equal(keys(r), keys(p)) || r["actor"] != p["actor"] || r["state"] != p["state"] {
				t.Errorf("-o json differs:\nresident   %v %v %v\nin-process %v %v %v", keys(r), r["actor"], r["state"], keys(p), p["actor"], p["state"])
			}
		})
	}
	// Another environment is another CLI's: it runs its dispatch itself, and starts no
	// second resident.
	if code, _, stderr := e.oneShot([]string{"AGORA_TEST_SOMETHING_ELSE=1"}, "--subagent", "ok"); code != 0 {
		t.Errorf("another environment: exit %d\n%s", code, stderr)
	}
	if got := e.residentPID(); got != pid || syscall.Kill(pid, 0) != nil {
		t.Errorf("the resident changed: pid %d, want %d still running", got, pid)
	}
	// The resident took exactly the dispatches without --in-process of this environment.
	if n := e.stopResident(); n != len(cases) {
		t.Errorf("the resident took %d dispatches, want %d", n, len(cases))
	}
	// Its CLIs exited before their stages were released (BackgroundTeardowns); the resident
	// released them all before it left: none is held, nothing is mounted under the home.
	e.requireReleased("after the resident left")
}

// TestResident_Leaves: a resident leaves after resident.idle with no dispatch, when
// agora.yaml changes, when serve starts (which then takes the hand-offs), and on --stop only
// after the dispatch it runs ended (that dispatch finishes as it would have).
func TestResident_Leaves(t *testing.T) {
	e := residentEnv(t, "resident: {idle: 3s}\n")
	start := func() int {
		t.Helper()
		if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
			t.Fatalf("dispatch: exit %d\n%s", code, stderr)
		}
		return e.waitResident()
	}
	pid := start()
	waitGone(t, pid, 15*time.Second, "resident.idle 3s")
	if _, err := os.Lstat(e.residentSock()); !os.IsNotExist(err) {
		t.Errorf("an idle resident left its socket: %v", err)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
	if !strings.Contains(string(log), `why="no dispatch for 3s"`) {
		t.Errorf("resident.log does not say why it left:\n%s", log)
	}

	t.Run("--stop waits for the dispatch in flight", func(t *testing.T) {
		pid := start()
		type result struct {
			code        int
			out, stderr string
		}
		cmd, stdout, lines := e.startOneShot("--subagent", "slow", "--progress")
		seen := waitLine(t, lines, "| working on it") // in flight, in the resident
		done := make(chan result, 1)
		go func() {
			rest := drain(lines)
			code := 0
			if err := cmd.Wait(); err != nil {
				code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			done <- result{code, stdout.String(), seen + rest}
		}()
		stop := exec.Command(agoraBin, "dispatch", "resident", "--stop")
		stop.Env = e.vars
		out, err := stop.CombinedOutput()
		if err != nil {
			t.Fatalf("--stop: %v\n%s", err, out)
		}
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("--stop returned while the resident (pid %d) runs", pid)
		}
		select {
		case r := <-done:
			if r.code != 0 || !strings.Contains(r.stderr, " finished (exit 0") {
				t.Errorf("the dispatch the resident ran while stopping: exit %d\n%s\n%s", r.code, r.out, r.stderr)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the dispatch did not end")
		}
		if !regexp.MustCompile(`pid \d+\) is leaving once its dispatches end`).Match(out) {
			t.Errorf("--stop said:\n%s", out)
		}
	})

	t.Run("agora.yaml changed", func(t *testing.T) {
		pid := start()
		f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = f.WriteString("\n# changed\n")
		must(t, err)
		must(t, f.Close())
		waitGone(t, pid, 10*time.Second, "agora.yaml changed")
	})

	t.Run("serve starts", func(t *testing.T) {
		pid := start()
		serve := e.serve()
		t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
		waitGone(t, pid, 10*time.Second, "serve started")
		before := e.handoffs()
		if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 || e.handoffs() != before+1 {
			t.Errorf("with serve: exit %d, serve took %d hand-offs\n%s", code, e.handoffs()-before, stderr)
		}
		if _, err := os.Lstat(e.residentSock()); !os.IsNotExist(err) {
			t.Errorf("a dispatch handed to serve started a resident: %v", err)
		}
	})
}

// TestResident_Off: resident: {idle: 0} starts none, nor does a --in-process dispatch.
func TestResident_Off(t *testing.T) {
	e := residentEnv(t, "resident: {idle: \"0\"}\n")
	for range 2 {
		if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
	}
	// A CLI that starts a resident opens its log before it exits (startResident): none is
	// there once both have exited, and no socket.
	for _, name := range []string{"resident.log", "resident.sock"} {
		if _, err := os.Lstat(filepath.Join(e.home, "orch", name)); !os.IsNotExist(err) {
			t.Errorf("resident: {idle: 0} started a resident dispatcher: %s: %v", name, err)
		}
	}
	cmd := exec.Command(agoraBin, "dispatch", "resident")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "off in agora.yaml") {
		t.Errorf("agora dispatch resident with idle 0: %v\n%s", err, out)
	}
}

// TestResident_Killed: a resident killed -9 while it runs a dispatch ends nothing silently:
// the CLI reads the dispatch's end (lost) from agora.db, and the next dispatch starts a new
// resident over the dead one's socket.
func TestResident_Killed(t *testing.T) {
	e := residentEnv(t, "")
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	pid := e.waitResident()
	cmd, _, lines := e.startOneShot("--subagent", "hang", "--progress")
	waitLine(t, lines, "| hanging")
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	err := cmd.Wait()
	rest := drain(lines)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(rest, "lost") {
		t.Errorf("after the resident was killed: %v\n%s", err, rest)
	}
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		t.Fatalf("the next dispatch: exit %d\n%s", code, stderr)
	}
	e.waitNewResident(pid)
}

// TestResident_OtherProcessContextRunsItself: a CLI whose umask or resource limits are not
// the resident's (another shell's) runs its dispatch itself, as one of another
// environment does; the resident's own CLI context still hands off.
func TestResident_OtherProcessContextRunsItself(t *testing.T) {
	e := residentEnv(t, "")
	e.firstResident()
	for _, shell := range []string{
		`umask 0077; exec "$0" dispatch run --subagent ok`,
		`ulimit -S -n 512; exec "$0" dispatch run --subagent ok`,
	} {
		cmd := exec.Command("sh", "-c", shell, agoraBin)
		cmd.Env = e.vars
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", shell, err, out)
		}
	}
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 {
		t.Fatalf("same context: exit %d\n%s", code, stderr)
	}
	if n := e.stopResident(); n != 1 {
		t.Errorf("the resident took %d dispatches, want only the one of its own context", n)
	}
}
