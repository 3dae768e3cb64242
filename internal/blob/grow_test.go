package blob_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/digest"
)

// TestStore_GetStopsAtTheCheckedSize (note30): a file that grows after Get's size check is
// refused after at most one byte past the checked size, not read to its end past maxSize. A
// FIFO at the blob's path is the file that grows: its size is 0 at the check and 4 MiB
// arrive. Failed before: Get read all 4 MiB and only then refused the hash.
func TestStore_GetStopsAtTheCheckedSize(t *testing.T) {
	s, dir := openStore(t)
	d := digest.Sum([]byte("x"))
	p := blobPath(dir, d)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("SKIP: mkfifo: %v", err)
	}
	written := make(chan int, 1)
	go func() {
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			written <- -1
			return
		}
		defer w.Close()
		n, _ := w.Write(bytes.Repeat([]byte("A"), 4<<20))
		written <- n
	}()
	_, err := s.Get(d, 1024)
	var ie *blob.IntegrityError
	if err == nil || errors.As(err, &ie) || !strings.Contains(err.Error(), "changed size") {
		t.Errorf("got %v, want a refusal of a blob that changed size while read", err)
	}
	if n := <-written; n >= 4<<20 {
		t.Errorf("the writer got all %d bytes out: Get read past its size check", n)
	}
}
