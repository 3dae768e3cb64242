package capped_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/capped"
)

// TestRedTeam44D_ReadFileRefusesAFIFOWithoutWaiting: ReadFile refuses pipes, so a FIFO named
// where a file is expected (a plan given to `agora orch schedule add` or `orch submit`) is
// refused at once as not a regular file, and a device too. Failed before: ReadFile opened the
// FIFO blocking and waited for a writer forever (the CLI hung, and SIGTERM did not end it).
func TestRedTeam44D_ReadFileRefusesAFIFOWithoutWaiting(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "plan.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("SKIP: mkfifo: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link.yaml")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, link, os.DevNull} {
		done := make(chan error, 1)
		go func() {
			_, err := capped.ReadFile(path, 1<<20)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("%s: %v, want it refused as not a regular file", path, err)
			}
		case <-time.After(30 * time.Second):
			// Unblock the reader so the test ends.
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			t.Fatalf("%s: ReadFile still waits after 30 s (on a writer that never comes)", path)
		}
	}
}
