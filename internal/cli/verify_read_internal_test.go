package cli

import (
	"bytes"
	"io"
	"testing"
)

// TestReadBundle_StdinGrowsGently: a bundle on stdin, whose size is unknown, is read whole and
// into a buffer not much larger than it, so a stream refused as too large does not cost
// four times the cap (#28 red team: 4.25 GB for a 1.1 GB stream).
func TestReadBundle_StdinGrowsGently(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789abcdef"), 2<<20+64) // just over 32 MiB, where a doubling buffer holds 64
	got, err := readBundle(io.MultiReader(bytes.NewReader(want)), "-")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(want))
	}
	if cap(got) > len(want)*3/2 {
		t.Errorf("a %d-byte stream held in a %d-byte buffer: more than 1.5x", len(want), cap(got))
	}
}
