package local

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// TestCopySecrets_Whole: a claim hands the slot's worker the dispatch's secrets whole, as a
// cold sandbox's fd 3 gets them. Failed before: the copy stopped at 1 MiB without a word.
func TestCopySecrets_Whole(t *testing.T) {
	src := bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16) // 3 MiB
	dr, dw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { dw.Write(src); dw.Close() }()
	go copySecrets(sw, dr)
	got, err := io.ReadAll(sr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("the slot's worker read %d bytes of the dispatch's %d", len(got), len(src))
	}
}
