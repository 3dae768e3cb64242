package s3

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLoadCredentials_File: a credentials file is read only when it is a regular file no other
// user may read; a FIFO named there is refused at once (it hung the command before), and a
// readable-by-others file is refused without echoing its secret.
func TestLoadCredentials_File(t *testing.T) {
	dir := t.TempDir()
	const body = "AWS_ACCESS_KEY_ID=AKIDEXAMPLE\nAWS_SECRET_ACCESS_KEY=s3cret-0123456789\n"
	good := filepath.Join(dir, "good.env")
	if err := os.WriteFile(good, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadCredentials(good, nil); err != nil || c.AccessKeyID != "AKIDEXAMPLE" {
		t.Fatalf("a 0600 file: %+v, %v", c, err)
	}
	open := filepath.Join(dir, "open.env")
	if err := os.WriteFile(open, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o644)
	if _, err := LoadCredentials(open, nil); err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a file others may read: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.env")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(fifo, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO: %v", err)
	}
}
