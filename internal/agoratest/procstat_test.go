package agoratest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadProcStat_ACommandNamedLikeTheFormat: a child whose command name holds ") " and a
// space is read whole, its fields counted from the last ')': its state, parent, session and
// start; once killed it is a zombie (not Running) until reaped, then gone.
func TestReadProcStat_ACommandNamedLikeTheFormat(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("SKIP: no sleep(1) on PATH: ", err)
	}
	body, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(t.TempDir(), "x) R 1 (y")
	if err := os.WriteFile(named, body, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(named, "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	defer cmd.Process.Kill()

	st, err := ReadProcStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "x) R 1 (y" || st.PPID != os.Getpid() || st.Session != pid || st.Start == "" || st.State == "" {
		t.Fatalf("ReadProcStat(%d) = %+v, want comm %q, parent %d, session %d, a start and a state", pid, st, "x) R 1 (y", os.Getpid(), pid)
	}
	if !Running(pid) {
		t.Fatalf("Running(%d) = false for a live child (%+v)", pid, st)
	}
	again, err := ReadProcStat(pid)
	if err != nil || again.Start != st.Start {
		t.Fatalf("the same process read again: start %q (%v), want %q", again.Start, err, st.Start)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 30*time.Second, "the killed child to be a zombie", func() bool { return !Running(pid) })
	if st, err := ReadProcStat(pid); err != nil || st.State != "Z" {
		t.Fatalf("killed, not yet reaped: %+v, %v; want state Z", st, err)
	}
	cmd.Wait()
	if _, err := ReadProcStat(pid); !os.IsNotExist(err) {
		t.Fatalf("reaped: ReadProcStat = %v, want not exist", err)
	}
	if Running(pid) {
		t.Fatalf("Running(%d) = true once reaped", pid)
	}
}
