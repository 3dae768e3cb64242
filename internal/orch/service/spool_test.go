package service

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpool: what is written comes back whole, in memory up to spoolMemory and past it
// through a file that has no name in the spool's directory; a directory that is not there is
// an error naming it.
func TestSpool(t *testing.T) {
	for _, size := range []int{0, 10, spoolMemory, spoolMemory + 1, 3*spoolMemory + 12345} {
		dir := t.TempDir()
		sp := &spool{dir: dir}
		want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		for p := want; len(p) > 0; { // writes of uneven sizes, one straddling the limit
			n := min(len(p), 70001)
			if _, err := sp.Write(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
		if inFile := sp.f != nil; inFile != (size > spoolMemory) {
			t.Errorf("%d bytes: in a file %v", size, inFile)
		}
		if names, _ := os.ReadDir(dir); len(names) != 0 {
			t.Errorf("%d bytes: the directory holds %v", size, names)
		}
		var got bytes.Buffer
		if _, err := sp.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%d bytes: %d came back, not the same", size, got.Len())
		}
		if err := sp.Close(); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(t.TempDir(), "gone")
	sp := &spool{dir: missing}
	_, err := sp.Write(make([]byte, spoolMemory+1))
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("spool in a missing directory: %v", err)
	}
}
