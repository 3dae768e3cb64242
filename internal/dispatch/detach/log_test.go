package detach

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSupervisorLog_StderrAppendedRotatedNoLink: a detached supervisor's stderr is appended to
// the home's supervisors' log (0600), one grown past logKeep is moved to .1 before the next
// supervisor starts, and a symlink planted at its path is not followed (the supervisor's
// stderr falls back to /dev/null and the link's target is untouched). Failed before: stderr
// was /dev/null and no log existed.
func TestSupervisorLog_StderrAppendedRotatedNoLink(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "dispatches")
	bin := fakeAgora(t, dir, "echo \"supervisor of $3 says why\" >&2")
	s := &Supervisors{Bin: bin, StateDir: state}
	run := func(id string) {
		t.Helper()
		exited, _, err := s.spawn("", id)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the supervisor did not exit")
		}
	}
	path := filepath.Join(state, LogFile)
	run("D1")
	run("D2")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "supervisor of D1 says why\nsupervisor of D2 says why\n" {
		t.Errorf("the supervisors' log holds %q, want both supervisors' lines", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the supervisors' log: %v %v, want mode 0600", fi, err)
	}

	if err := os.WriteFile(path, make([]byte, logKeep+1), 0o600); err != nil {
		t.Fatal(err)
	}
	run("D3")
	if fi, err := os.Stat(path + ".1"); err != nil || fi.Size() != logKeep+1 {
		t.Errorf("the full log was not kept as .1: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "supervisor of D3 says why\n" {
		t.Errorf("after rotation the log holds %q", b)
	}

	victim := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	run("D4")
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("a supervisor wrote through a symlink at the log's path: %q", b)
	}

	// A FIFO at the path: refused at once (never an open that waits for a reader).
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := supervisorStderr(state)
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO at the log's path was taken as the supervisors' log")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening the supervisors' log blocked on a FIFO at its path")
	}
}
