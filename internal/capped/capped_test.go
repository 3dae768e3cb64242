package capped

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("hello"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	if b, err := ReadFile(file, 5); err != nil || string(b) != "hello" {
		t.Fatalf("ReadFile: got %q, %v", b, err)
	}
	var tl *TooLargeError
	if _, err := ReadFile(file, 4); !errors.As(err, &tl) || tl.Limit != 4 {
		t.Fatalf("ReadFile over the limit: got %v, want TooLargeError", err)
	}
	if b, err := ReadFile(link, 5); err != nil || string(b) != "hello" {
		t.Fatalf("ReadFile follows a symlink a person named: got %q, %v", b, err)
	}
	if _, err := NoFollow(link, 5); !errors.Is(err, ErrSymlink) {
		t.Fatalf("NoFollow on a symlink: got %v, want ErrSymlink", err)
	}
	if _, err := ReadFile(dir, 5); err == nil {
		t.Fatal("ReadFile of a directory succeeded")
	}
	done := make(chan error, 1)
	go func() { _, err := NoFollow(fifo, 5); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("NoFollow of a FIFO succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("NoFollow blocked on a FIFO")
	}
}
