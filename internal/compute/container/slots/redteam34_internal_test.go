package slots

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRedTeam34_SlotPlaceFIFONeverBlocks: a docker slot's place is filled from a source that
// was a regular file when listed; one swapped for a FIFO (no writer) since is refused at once,
// never waited on in its open.
func TestRedTeam34_SlotPlaceFIFONeverBlocks(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ca-certificates.crt")
	if err := os.WriteFile(src, []byte("CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(src, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "place")
	done := make(chan error, 1)
	go func() { done <- copyInto(src, dst, fi) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was put in a slot's place")
		}
	case <-time.After(time.Minute): // a hang guard, not a measure: the refusal is immediate
		if w, err := os.OpenFile(src, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("filling a slot's place blocked on a FIFO source")
	}
}
