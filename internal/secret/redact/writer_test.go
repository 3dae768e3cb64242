package redact

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// streamed writes in through r.Writer in chunks of size n (n <= 0: one write) and returns the result.
func streamed(t testing.TB, r *Redactor, in []byte, n int) string {
	t.Helper()
	var buf bytes.Buffer
	w := r.Writer(&buf)
	if n <= 0 {
		n = len(in) + 1
	}
	for len(in) > 0 {
		k := min(n, len(in))
		if got, err := w.Write(in[:k]); err != nil || got != k {
			t.Fatalf("Write: got %d, %v; want %d, nil", got, err, k)
		}
		in = in[k:]
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return buf.String()
}

func TestWriter_SplitAtEveryPoint(t *testing.T) {
	second := []byte("0123456789abcdef-second")
	r := New([][]byte{canary, second})
	forms := encodedForms(canary)
	in := []byte("head " + string(canary) + " mid " + forms["base64 std"] + " " + string(second) + string(canary) + " end")
	want := r.Bytes(in)
	if !bytes.Contains(want, []byte(Mask)) {
		t.Fatal("nothing to mask in the input")
	}
	for i := 0; i <= len(in); i++ {
		for _, j := range []int{i, min(i+1, len(in)), min(i+7, len(in)), len(in)} {
			var buf bytes.Buffer
			w := r.Writer(&buf)
			for _, part := range [][]byte{in[:i], in[i:j], in[j:]} {
				if _, err := w.Write(part); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("split at %d,%d: got %q, want %q", i, j, buf.Bytes(), want)
			}
			for name, f := range forms {
				if bytes.Contains(buf.Bytes(), []byte(f)) {
					t.Fatalf("split at %d,%d: %s form passed through", i, j, name)
				}
			}
		}
	}
	for _, n := range []int{1, 2, 3, 5, 8, 13} {
		if got := streamed(t, r, in, n); got != string(want) {
			t.Errorf("chunks of %d: got %q, want %q", n, got, want)
		}
	}
}

// recorder remembers each write so a test can see what passed through and when.
type recorder struct {
	writes []string
	closed bool
}

func (r *recorder) Write(p []byte) (int, error) {
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) Close() error {
	r.closed = true
	return nil
}

func (r *recorder) all() string { return strings.Join(r.writes, "") }

func TestWriter_HoldsBackLittleAndNoPartialSecret(t *testing.T) {
	r := New([][]byte{canary})
	in := []byte(strings.Repeat("plain text ", 20) + string(canary) + strings.Repeat(" more", 30))
	rec := &recorder{}
	w := r.Writer(rec).(*writer)
	for i := range in {
		if _, err := w.Write(in[i : i+1]); err != nil {
			t.Fatal(err)
		}
		if held := len(w.pending); held > r.maxLen-1 {
			t.Fatalf("after %d bytes: holding %d bytes, want at most %d", i+1, held, r.maxLen-1)
		}
		// Whatever has been emitted must be a prefix of the final output, and no write may
		// contain a piece of the canary long enough to matter.
		if got := rec.all(); !strings.HasPrefix(string(r.Bytes(in)), got) {
			t.Fatalf("after %d bytes: emitted %q is not a prefix of the final output", i+1, got)
		}
		if strings.Contains(rec.all(), "c4n4ry") {
			t.Fatalf("after %d bytes: part of the canary was passed through", i+1)
		}
	}
	if len(rec.all()) == 0 {
		t.Fatal("nothing emitted before Close: the writer holds back everything")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.all(), string(r.Bytes(in)); got != want {
		t.Errorf("final: got %q, want %q", got, want)
	}
	if rec.closed {
		t.Error("Close closed the underlying writer")
	}
}

type failWriter struct{ calls int }

var errDisk = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	f.calls++
	return 0, errDisk
}

func TestWriter_Errors(t *testing.T) {
	r := New([][]byte{canary})
	fw := &failWriter{}
	w := r.Writer(fw)
	big := bytes.Repeat([]byte("x"), 4*r.maxLen)
	if n, err := w.Write(big); !errors.Is(err, errDisk) || n != 0 {
		t.Fatalf("Write to a failing writer: got %d, %v; want 0, %v", n, err, errDisk)
	}
	if _, err := w.Write(big); !errors.Is(err, errDisk) {
		t.Errorf("second Write: got %v, want the sticky %v", err, errDisk)
	}
	if err := w.Close(); !errors.Is(err, errDisk) {
		t.Errorf("Close: got %v, want the sticky %v", err, errDisk)
	}
	if fw.calls != 1 {
		t.Errorf("underlying writer called %d times after failing, want 1", fw.calls)
	}

	var buf bytes.Buffer
	w = r.Writer(&buf)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := w.Write([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: got %v, want ErrClosed", err)
	}
}

func TestWriter_Empty(t *testing.T) {
	rec := &recorder{}
	w := New(nil).Writer(rec)
	for _, s := range []string{"a", "bc", "", "def"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(rec.writes); got != "[a bc def]" {
		t.Errorf("empty redactor writes: got %s, want each write passed straight through", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
