package verify

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestReadBundle_StdinGrowsGently: a bundle on stdin, whose size is unknown, is read whole and
// into a buffer not much larger than it, so a stream refused as too large does not cost
// four times the cap (4.25 GB for a 1.1 GB stream).
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

// TestReadBundle_FileOnEveryCPU: a large bundle file is read on every CPU into exactly its
// bytes, and a file that is not the size it was found to be (it grew or shrank meanwhile)
// is not taken from that read: readBundle then reads it again as a stream.
func TestReadBundle_FileOnEveryCPU(t *testing.T) {
	want := make([]byte, parallelReadFrom+12345)
	for i := range want {
		want[i] = byte(i*7 + i>>13)
	}
	path := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, procs := range []int{1, 2, 3} {
		prev := runtime.GOMAXPROCS(procs)
		got, err := readBundle(nil, path)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("GOMAXPROCS %d: read %d bytes that differ from the %d written", procs, len(got), len(want))
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int64(len(want))
	if got, ok := readAtOnEveryCPU(f, size); !ok || !bytes.Equal(got, want) {
		t.Fatalf("the file at its size: ok %v, %d bytes", ok, len(got))
	}
	if _, ok := readAtOnEveryCPU(f, size-1); ok {
		t.Error("a file a byte longer than the size taken was read as complete")
	}
	if _, ok := readAtOnEveryCPU(f, size+1); ok {
		t.Error("a file a byte shorter than the size taken was read as complete")
	}
}

// TestWriteCheckName_IsCheckName: a row's name written in parts is checkName's, byte for
// byte, whatever spaces either part starts or ends with.
func TestWriteCheckName_IsCheckName(t *testing.T) {
	parts := []string{"", "entry", "inclusion", " entry", "entry ", "5", " 5", "5 ", "\u00a0x", "x\u00a0", "x\u0085", "\u2003", "\xff", "a\xff", "\xffa", "\t", "a b"}
	for _, check := range parts {
		for _, item := range parts {
			c := verify.Result{Check: check, Item: item}
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			writeCheckName(w, c)
			w.Flush()
			if got, want := buf.String(), checkName(c); got != want {
				t.Errorf("check %q item %q: wrote %q, checkName %q", check, item, got, want)
			}
		}
	}
}
