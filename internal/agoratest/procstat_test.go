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
	if st.Comm != "x) R 1 (y" || st.PPID != os.Getpid() || st.Session != pid || st.Start == "" || st.State == "" || st.Threads != 1 {
		t.Fatalf("ReadProcStat(%d) = %+v, want comm %q, parent %d, session %d, one thread, a start and a state", pid, st, "x) R 1 (y", os.Getpid(), pid)
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
	if st, err := ReadProcStat(pid); err != nil || st.State != "Z" || st.Threads != 1 {
		t.Fatalf("killed, not yet reaped: %+v, %v; want state Z, its one thread", st, err)
	}
	cmd.Wait()
	if _, err := ReadProcStat(pid); !os.IsNotExist(err) {
		t.Fatalf("reaped: ReadProcStat = %v, want not exist", err)
	}
	if Running(pid) {
		t.Fatalf("Running(%d) = true once reaped", pid)
	}
}

// TestRunning_AFirstThreadEndedWhileOthersRun: a process whose first thread has exited while
// another runs shows state Z in /proc/PID/stat, as a Go program does for a moment while it
// execs from a thread other than its first. It still runs: Running says so, until the last
// thread ends.
func TestRunning_AFirstThreadEndedWhileOthersRun(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: no python3 on PATH (it ends its first thread with pthread_exit through ctypes): ", err)
	}
	// The second thread runs until stdin closes; then the process ends.
	cmd := exec.Command(python, "-c", `import ctypes, sys, threading
threading.Thread(target=sys.stdin.read).start()
ctypes.CDLL(None).pthread_exit(None)`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	defer cmd.Process.Kill()

	WaitFor(t, 30*time.Second, "the first thread to exit", func() bool {
		st, err := ReadProcStat(pid)
		return err == nil && st.State == "Z"
	})
	st, err := ReadProcStat(pid)
	if err != nil || st.Threads != 2 {
		t.Fatalf("first thread ended: %+v, %v; want state Z with 2 threads", st, err)
	}
	if !Running(pid) {
		t.Fatalf("Running(%d) = false while its second thread runs (%+v)", pid, st)
	}

	stdin.Close()
	WaitFor(t, 30*time.Second, "the process to end with its last thread", func() bool { return !Running(pid) })
	if st, err := ReadProcStat(pid); err != nil || st.State != "Z" || st.Threads != 1 {
		t.Fatalf("ended, not yet reaped: %+v, %v; want state Z, one thread", st, err)
	}
}
