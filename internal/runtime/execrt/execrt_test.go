package execrt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var basePath = "PATH=/usr/local/bin:/usr/bin:/bin"

func TestRun_ExitCodeAndOutput(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"zero", "echo out; echo err >&2", 0, "out\n", "err\n"},
		{"nonzero", "echo bye; exit 7", 7, "bye\n", ""},
		{"killed by signal", "kill -9 $$", -1, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			res, err := Run(t.Context(), Spec{
				Argv: []string{"sh", "-c", tt.script}, Dir: t.TempDir(), Env: []string{basePath},
				Stdout: &out, Stderr: &errb,
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tt.wantCode || res.TimedOut || res.Cancelled {
				t.Errorf("got %+v, want exit code %d", res, tt.wantCode)
			}
			if out.String() != tt.wantStdout || errb.String() != tt.wantStderr {
				t.Errorf("got stdout %q stderr %q, want %q %q", out.String(), errb.String(), tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestRun_EnvIsCompleteAndNotInherited(t *testing.T) {
	t.Setenv("AGORA_EXECRT_LEAK", "from-parent")
	var out bytes.Buffer
	res, err := Run(t.Context(), Spec{
		Argv: []string{"sh", "-c", "env"}, Dir: t.TempDir(),
		Env:    []string{basePath, "ONLY=this"},
		Stdout: &out,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	got := out.String()
	if strings.Contains(got, "AGORA_EXECRT_LEAK") {
		t.Errorf("the parent's environment leaked into the command:\n%s", got)
	}
	if !strings.Contains(got, "ONLY=this\n") {
		t.Errorf("the given environment is missing:\n%s", got)
	}
}

func TestRun_WorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(t.Context(), Spec{Argv: []string{"sh", "-c", "echo hi > here"}, Dir: dir, Env: []string{basePath}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "here")); err != nil || string(b) != "hi\n" {
		t.Errorf("got %q, %v; want the file written in Dir", b, err)
	}
}

// pidsAlive reports the pids that are still running (zombies count as dead).
func pidsAlive(t *testing.T, pids []int) []int {
	t.Helper()
	var alive []int
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The state follows the command name in parentheses.
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		alive = append(alive, pid)
	}
	return alive
}

func waitDead(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		alive := pidsAlive(t, pids)
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range alive {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("processes %v still alive", alive)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readPids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad pid %q", f)
		}
		pids = append(pids, n)
	}
	if len(pids) == 0 {
		t.Fatal("no pids recorded")
	}
	return pids
}

func TestRun_TimeoutKillsGrandchildren(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	var out bytes.Buffer // a pipe, so a surviving grandchild would also hold Run up
	start := time.Now()
	res, err := Run(t.Context(), Spec{
		Argv:    []string{"sh", "-c", "sleep 100 & echo $! >> " + pidfile + "; sh -c 'sleep 100 & echo $! >> " + pidfile + "; wait' & sleep 100"},
		Dir:     dir,
		Env:     []string{basePath},
		Stdout:  &out,
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.TimedOut || res.ExitCode != -1 {
		t.Errorf("got %+v, want TimedOut and exit code -1", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v; the timeout did not stop it", d)
	}
	waitDead(t, readPids(t, pidfile))
}

func TestRun_BackgroundProcessKilledAfterLeaderExits(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	var out bytes.Buffer
	start := time.Now()
	res, err := Run(t.Context(), Spec{
		Argv:   []string{"sh", "-c", "sleep 100 & echo $! > " + pidfile + "; exit 3"},
		Dir:    dir,
		Env:    []string{basePath},
		Stdout: &out,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 3 || res.TimedOut {
		t.Errorf("got %+v, want exit code 3", res)
	}
	if d := time.Since(start); d > drainTimeout+5*time.Second {
		t.Errorf("Run took %v", d)
	}
	waitDead(t, readPids(t, pidfile))
}

func TestRun_ContextCancelKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pids")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Spec{
		Argv: []string{"sh", "-c", "sleep 100 & echo $! > " + pidfile + "; sleep 100"},
		Dir:  dir,
		Env:  []string{basePath},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !res.Cancelled || res.TimedOut {
		t.Errorf("got %+v, want Cancelled", res)
	}
	waitDead(t, readPids(t, pidfile))
}

func TestRun_StartErrors(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
	}{
		{"empty argv", Spec{Dir: "/"}},
		{"no dir", Spec{Argv: []string{"true"}, Env: []string{basePath}}},
		{"not on the given PATH", Spec{Argv: []string{"true"}, Dir: "/", Env: []string{"PATH=/nonexistent"}}},
		{"no PATH at all", Spec{Argv: []string{"true"}, Dir: "/"}},
		{"absolute path missing", Spec{Argv: []string{"/nonexistent/prog"}, Dir: "/", Env: []string{basePath}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Run(t.Context(), tt.spec); err == nil {
				t.Error("got no error")
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	noexec := filepath.Join(dir, "data")
	if err := os.WriteFile(noexec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, prog, path, want string
		wantErr                bool
	}{
		{"found", "tool", "/nonexistent:" + dir, exe, false},
		{"first wins", "sh", "/bin:/usr/bin", "/bin/sh", false},
		{"not executable", "data", dir, "", true},
		{"directory", "sub", dir, "", true},
		{"relative dir skipped", "tool", ".", "", true},
		{"empty entry skipped", "tool", ":", "", true},
		{"slash used as is", exe, "", exe, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "relative dir skipped" || tt.name == "empty entry skipped" {
				t.Chdir(dir)
			}
			got, err := LookPath(tt.prog, tt.path)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("LookPath(%q, %q) = %q, %v; want %q, error %v", tt.prog, tt.path, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRun_SameWriterForBothStreams(t *testing.T) {
	var both bytes.Buffer
	res, err := Run(t.Context(), Spec{
		Argv: []string{"sh", "-c", "i=0; while [ $i -lt 200 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done"},
		Dir:  t.TempDir(), Env: []string{basePath}, Stdout: &both, Stderr: &both,
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	got := both.String()
	for _, w := range []string{"out0\n", "err0\n", "out199\n", "err199\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("output lost %q", w)
		}
	}
	if n := strings.Count(got, "\n"); n != 400 {
		t.Errorf("got %d lines, want 400", n)
	}
}
