package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRedTeam33_CtrlCWhileServeAnswers: a Ctrl-C while the front waits for serve's answer
// (serve slow or stopped: it waits up to 5 s) is this command's, as it is agora-full's: when
// serve then declines, or never answers, the command ends interrupted (130) and runs no
// dispatch. Failed before: the front's signal handler swallowed the Ctrl-C and exec'd
// agora-full, which ran the dispatch in full (here: exit 6, subagent "x" not found, where
// agora-full itself ends 130).
func TestRedTeam33_CtrlCWhileServeAnswers(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
	}{
		{"serve declines", declines},
		{"serve drops the connection", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Each request hands the test the channel that lets serve answer it.
			asked := make(chan chan struct{}, 4)
			fs := newFakeServe(t, func(w http.ResponseWriter, r *http.Request) {
				release := make(chan struct{})
				asked <- release
				select {
				case <-release:
				case <-time.After(30 * time.Second):
				}
				c.answer(w, r)
			})
			if err := os.Chmod(fs.home, 0o700); err != nil {
				t.Fatal(err)
			}
			if got := full(t, fs.env(), "init"); got.code != 0 {
				t.Fatalf("agora init: %+v", got)
			}
			interrupt := func(bin string) result {
				t.Helper()
				cmd := exec.Command(bin, "dispatch", "run", "--subagent", "x")
				cmd.Args[0] = "agora"
				cmd.Env = fs.env()
				var out, errOut bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errOut
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				var release chan struct{}
				select {
				case release = <-asked: // the request is in: the command waits for serve's answer
				case <-time.After(30 * time.Second):
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("%s never asked serve", bin)
				}
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				// serve answers once the process took the signal: no longer pending in
				// any of its threads. Its handler may not have passed it on yet: the
				// command must count it all the same (signal.Stop waits for a delivery
				// under way).
				waitNotPending(t, cmd.Process.Pid)
				close(release)
				err := cmd.Wait()
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return result{code, out.String(), errOut.String()}
			}
			const interrupted = "agora: interrupted: agora dispatch run stopped before it finished ("
			want := interrupt(agoraBin[:len(agoraBin)-len("agora")] + fullName)
			if want.code != exitInterrupted || !strings.HasPrefix(want.err, interrupted) {
				t.Fatalf("agora-full interrupted while serve answers: %+v", want)
			}
			got := interrupt(agoraBin)
			if got.code != want.code || got.out != want.out || !strings.HasPrefix(got.err, interrupted) {
				t.Errorf("the front interrupted while serve answers ended %+v\nagora-full ended %+v", got, want)
			}
		})
	}
}

// waitNotPending waits until SIGINT is no longer pending for pid or any of its threads.
func waitNotPending(t *testing.T, pid int) {
	t.Helper()
	const sigint = 1 << (2 - 1)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		pending := false
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
		for _, f := range append(tasks, fmt.Sprintf("/proc/%d/status", pid)) {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				k, v, _ := strings.Cut(line, ":")
				if k != "SigPnd" && k != "ShdPnd" {
					continue
				}
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && n&sigint != 0 {
					pending = true
				}
			}
		}
		if !pending {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("SIGINT still pending for %d after 30s", pid)
}
