package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcState reads the state letter past a command name that holds ") " itself, as an
// agent can name its process.
func TestProcState(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("SKIP: no sleep binary to name after an agent's trick")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(t.TempDir(), "x) Z (y")
	if err := os.WriteFile(named, b, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(named, "30")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", named, err)
	}
	defer cmd.Process.Kill()
	st, err := procState(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.ContainsRune("RSDtT", rune(st)) {
		t.Errorf("state %q, want a live state (R, S, D, t, T)", st)
	}
	if st, err := procState(os.Getpid()); err != nil || !strings.ContainsRune("RSD", rune(st)) {
		t.Errorf("own state %q, %v; want R, S or D", st, err)
	}
}

// TestStopNeedsBothKeys: the worker never kills(-1) unless the host said the sandbox has its
// own PID namespace AND it runs as `agora worker` in a sandbox (Main). A test calling it with
// either missing must return at once (and this test process must survive to report it).
func TestStopNeedsBothKeys(t *testing.T) {
	for _, c := range []struct{ pidns, stopOthers bool }{{false, false}, {true, false}, {false, true}} {
		r := &runner{opts: options{stopOthers: c.stopOthers}}
		r.man.PIDNamespace = c.pidns
		if fl := r.stop(context.Background()); fl != nil {
			t.Errorf("%+v: %v", c, fl.detail)
		}
	}
}
